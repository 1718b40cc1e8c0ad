package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Source is what the metrics read at scrape time. Its methods are called
// on the scraping request's goroutine, concurrently with everything else:
// they must be safe for concurrent use and must not wait on a server.
type Source interface {
	// Sessions are the established client sessions.
	Sessions() []Sessions
	// InFlight is the client POSTs being answered.
	InFlight() int64
	// Servers are the configured servers, each once.
	Servers() []Server
	// AuditDropped is the audit lines dropped; false without an audit log.
	AuditDropped() (int64, bool)
}

// Sessions is how many sessions one target has of one era.
type Sessions struct {
	Target string // the server's or the endpoint's name
	Kind   string // "server" or "endpoint"
	Era    string // the negotiated protocol version, or "legacy-sse"
	N      int
}

// Server states (Server.State).
const (
	StateStarting   = "starting"
	StateReady      = "ready"
	StateBackoff    = "backoff"
	StateFailed     = "failed"
	StatePerSession = "per-session" // processes (or remote sessions) are per client session: no state of its own
)

// States are the values of the state label, each reported (0 or 1) for
// every server.
var States = []string{StateStarting, StateReady, StateBackoff, StateFailed, StatePerSession}

// Server is one configured server at scrape time.
type Server struct {
	Name    string
	State   string // one of States
	Up      bool   // ready (a per-session server counts as up, as /readyz has it)
	Pending int    // requests in flight upstream, queued ones included
	// Counters are its shared process's counters (summed over its
	// processes with "processes" above 1); nil for a server without one
	// (per-session, remote).
	Counters *Counters
	// Processes are its shared processes one by one, for a server with
	// "processes" above 1; nil otherwise.
	Processes []Process
}

// Process is one process of a shared server's pool ("processes"), labelled
// by its index in the pool.
type Process struct {
	Up        bool   // ready
	Sessions  int    // sessions pinned to it
	Pending   int    // requests in flight to it
	Restarts  uint64 // its starts after the first
	Forwarded uint64 // client requests written to it
}

// Counters are the counters of a server's shared process (its
// multiplexer's and its supervisor's), each monotonic.
type Counters struct {
	Restarts                uint64 // processes started after the first
	Forwarded               uint64 // client requests written upstream
	TimedOut                uint64 // client requests answered with a timeout
	Garbage                 uint64 // upstream lines that are not JSON-RPC
	UnknownReplies          uint64 // upstream replies matching no pending request
	Unroutable              uint64 // server requests refused: no single session to route to
	OversizedLines          uint64 // upstream lines over the line limit
	DroppedProgress         uint64 // progress for requests no longer pending
	QueueFull               uint64 // client requests refused: their session's queue was full
	DroppedSends            uint64 // best-effort messages not written upstream
	DroppedNotifications    uint64 // server notifications with no single session to go to
	LivenessFailures        uint64 // liveness pings unanswered or refused
	ServerRequestsOverLimit uint64 // server requests refused: too many waiting for clients
	TasksForgotten          uint64 // tasks forgotten: their session created more than its bound
}

// Metrics is one gateway's metrics: a registry of its own.
type Metrics struct {
	reg      *prometheus.Registry
	requests *requestMetrics
}

// New returns the metrics of a gateway reading src at scrape time.
func New(src Source) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), requests: newRequestMetrics()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.requests.collectors()...)
	m.reg.MustRegister(newScrapeCollector(src))
	if cs, ok := src.(CompatSource); ok { // compat.go
		m.reg.MustRegister(compatCollector{cs})
	}
	return m
}

// Request counts one client request answered. It never blocks.
func (m *Metrics) Request(r *Request) { m.requests.observe(r) }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Gatherer is the registry, for tests and for other exporters.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }
