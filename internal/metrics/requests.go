package metrics

import (
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the metrics fed per client request (Metrics.Request).

// Request is one client request answered, as the HTTP front records it.
type Request struct {
	Target   string // the server's or the endpoint's name
	Kind     string // "server" or "endpoint"
	Method   string // the JSON-RPC method ("" for one refused before its body was read)
	Outcome  string // ok, error, cancelled, denied, rate_limited, overloaded, unauthenticated, forbidden
	Duration time.Duration
	BytesIn  int64
	BytesOut int64
}

// durationBuckets are the request-duration histogram's bounds in seconds:
// from a cached list to a long tool call.
var durationBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// requestMetrics are the metrics of Request.
type requestMetrics struct {
	total         *prometheus.CounterVec   // kind, target, method, outcome
	duration      *prometheus.HistogramVec // kind, target, method
	bytesIn       *prometheus.CounterVec   // kind, target
	bytesOut      *prometheus.CounterVec   // kind, target
	authRefusals  *prometheus.CounterVec   // kind, target, outcome
	limitRefusals *prometheus.CounterVec   // kind, target, outcome

	// series holds, by seriesKey, the children of total, duration,
	// bytesIn and bytesOut that a request of those labels feeds: looked up
	// once per label set instead of four times per request (each
	// WithLabelValues hashes its labels and takes its vector's lock). It
	// is bounded as the vectors are: targets by the configuration, method
	// and outcome by Method and Outcome. Nothing deletes series, so a
	// child kept here is always the one the vector exposes.
	series sync.Map
}

// seriesKey is the labels of a request's series.
type seriesKey struct{ kind, target, method, outcome string }

// requestSeries are the series a request of one seriesKey feeds.
type requestSeries struct {
	total, bytesIn, bytesOut prometheus.Counter
	duration                 prometheus.Observer
}

func newRequestMetrics() *requestMetrics {
	target := []string{"kind", "target"}
	return &requestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_requests_total",
			Help: "Client JSON-RPC requests answered, by target, method and outcome.",
		}, append(target, "method", "outcome")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgate_request_duration_seconds",
			Help:    "Time from a client request's arrival to its answer, by target and method.",
			Buckets: durationBuckets,
		}, append(target, "method")),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_bytes_in_total",
			Help: "Bytes of client requests, by target.",
		}, target),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_bytes_out_total",
			Help: "Bytes of the answers to client requests, by target.",
		}, target),
		authRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_auth_refusals_total",
			Help: "Requests refused by authentication (unauthenticated: 401; forbidden: 403), by target.",
		}, append(target, "outcome")),
		limitRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_limit_refusals_total",
			Help: "Requests refused by a limit (rate_limited: 429, a principal's; overloaded: 503, the gateway's), by target.",
		}, append(target, "outcome")),
	}
}

func (m *requestMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.total, m.duration, m.bytesIn, m.bytesOut, m.authRefusals, m.limitRefusals}
}

// observe counts r.
func (m *requestMetrics) observe(r *Request) {
	method := Method(r.Method)
	outcome := Outcome(r.Outcome)
	s := m.seriesOf(seriesKey{kind: r.Kind, target: r.Target, method: method, outcome: outcome})
	s.total.Inc()
	s.duration.Observe(r.Duration.Seconds())
	s.bytesIn.Add(float64(max(r.BytesIn, 0)))
	s.bytesOut.Add(float64(max(r.BytesOut, 0)))
	switch outcome {
	case "unauthenticated", "forbidden":
		m.authRefusals.WithLabelValues(r.Kind, r.Target, outcome).Inc()
	case "rate_limited", "overloaded":
		m.limitRefusals.WithLabelValues(r.Kind, r.Target, outcome).Inc()
	}
}

// seriesOf returns the series of k, made on first use.
func (m *requestMetrics) seriesOf(k seriesKey) *requestSeries {
	if s, ok := m.series.Load(k); ok {
		return s.(*requestSeries)
	}
	s := &requestSeries{
		total:    m.total.WithLabelValues(k.kind, k.target, k.method, k.outcome),
		duration: m.duration.WithLabelValues(k.kind, k.target, k.method),
		bytesIn:  m.bytesIn.WithLabelValues(k.kind, k.target),
		bytesOut: m.bytesOut.WithLabelValues(k.kind, k.target),
	}
	got, _ := m.series.LoadOrStore(k, s)
	return got.(*requestSeries)
}

// Method is the method label of a request's method: the method itself
// when MCP defines it, "none" for no method (a POST refused before its
// messages were read), else "other", so a client cannot add label values.
func Method(m string) string {
	switch {
	case protocol.IsClientRequest(m):
		return m
	case m == "":
		return "none"
	}
	return "other"
}

// outcomes are the outcome label's values.
var outcomes = map[string]bool{
	"ok": true, "error": true, "cancelled": true, "denied": true,
	"rate_limited": true, "overloaded": true, "unauthenticated": true, "forbidden": true,
}

// Outcome is the outcome label of an outcome: itself when known, else
// "error".
func Outcome(o string) string {
	if outcomes[o] {
		return o
	}
	return "error"
}
