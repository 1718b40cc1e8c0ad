package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// This file is the collector of what is read at scrape time from a
// Source: gauges of the state now, and counters kept elsewhere (the
// multiplexers', the supervisors', the audit log's), exported as they are
// so that they are never counted twice.

// counterDesc is one of Counters' fields as a metric.
type counterDesc struct {
	desc *prometheus.Desc
	get  func(*Counters) uint64
}

// counterDescs are Counters' metrics, by server.
var counterDescs = []counterDesc{
	counter("mcpgate_server_restarts_total", "Processes of the server's shared process started after the first.", func(c *Counters) uint64 { return c.Restarts }),
	counter("mcpgate_mux_forwarded_total", "Client requests written to the server's shared process.", func(c *Counters) uint64 { return c.Forwarded }),
	counter("mcpgate_mux_timed_out_total", "Client requests answered with a timeout.", func(c *Counters) uint64 { return c.TimedOut }),
	counter("mcpgate_mux_garbage_total", "Lines from the server that are not JSON-RPC.", func(c *Counters) uint64 { return c.Garbage }),
	counter("mcpgate_mux_unknown_replies_total", "Replies from the server matching no pending request.", func(c *Counters) uint64 { return c.UnknownReplies }),
	counter("mcpgate_mux_unroutable_total", "Server-to-client requests refused: no single session to route them to.", func(c *Counters) uint64 { return c.Unroutable }),
	counter("mcpgate_mux_oversized_lines_total", "Lines from the server over its line limit.", func(c *Counters) uint64 { return c.OversizedLines }),
	counter("mcpgate_mux_dropped_progress_total", "Progress notifications for requests no longer pending.", func(c *Counters) uint64 { return c.DroppedProgress }),
	counter("mcpgate_mux_queue_full_total", "Client requests refused because their session's queue was full.", func(c *Counters) uint64 { return c.QueueFull }),
	counter("mcpgate_mux_dropped_sends_total", "Best-effort messages (cancellations, ping answers, refusals) not written to the server.", func(c *Counters) uint64 { return c.DroppedSends }),
	counter("mcpgate_mux_dropped_notifications_total", "Server notifications dropped: no single session to deliver them to.", func(c *Counters) uint64 { return c.DroppedNotifications }),
	counter("mcpgate_mux_liveness_failures_total", "Liveness pings unanswered in time or refused.", func(c *Counters) uint64 { return c.LivenessFailures }),
	counter("mcpgate_mux_server_requests_over_limit_total", "Server-to-client requests refused: too many waiting for a client's answer.", func(c *Counters) uint64 { return c.ServerRequestsOverLimit }),
	counter("mcpgate_mux_tasks_forgotten_total", "Tasks of a shared server forgotten because their session created more than 1,024: the oldest becomes unknown to every session.", func(c *Counters) uint64 { return c.TasksForgotten }),
}

func counter(name, help string, get func(*Counters) uint64) counterDesc {
	return counterDesc{desc: prometheus.NewDesc(name, help, []string{"server"}, nil), get: get}
}

var (
	sessionsDesc = prometheus.NewDesc("mcpgate_sessions",
		"Established client sessions, by target and era (protocol version, or legacy-sse).", []string{"kind", "target", "era"}, nil)
	inFlightDesc = prometheus.NewDesc("mcpgate_inflight_requests",
		"Client POSTs carrying requests being answered (a legacy one until its replies are on its stream).", nil, nil)
	upDesc = prometheus.NewDesc("mcpgate_server_up",
		"1 when the server is ready (a server whose processes are per session counts as ready), else 0.", []string{"server"}, nil)
	stateDesc = prometheus.NewDesc("mcpgate_server_state",
		"1 for the server's state (starting, ready, backoff, failed, per-session), 0 for the others.", []string{"server", "state"}, nil)
	pendingDesc = prometheus.NewDesc("mcpgate_server_pending_requests",
		"Requests in flight to the server, queued ones included, over all its processes.", []string{"server"}, nil)
	procLabels       = []string{"server", "process"}
	procUpDesc       = prometheus.NewDesc("mcpgate_server_process_up", "1 when the process of the server's pool (\"processes\" above 1) is ready, else 0.", procLabels, nil)
	procSessDesc     = prometheus.NewDesc("mcpgate_server_process_sessions", "Sessions pinned to the process of the server's pool.", procLabels, nil)
	procPendDesc     = prometheus.NewDesc("mcpgate_server_process_pending_requests", "Requests in flight to the process of the server's pool, queued ones included.", procLabels, nil)
	procRestDesc     = prometheus.NewDesc("mcpgate_server_process_restarts_total", "Starts of the process of the server's pool after its first.", procLabels, nil)
	procFwdDesc      = prometheus.NewDesc("mcpgate_server_process_forwarded_total", "Client requests written to the process of the server's pool.", procLabels, nil)
	auditDroppedDesc = prometheus.NewDesc("mcpgate_audit_dropped_total",
		"Audit log lines dropped because the log's queue was full.", nil, nil)
)

// scrapeCollector reads a Source at each scrape.
type scrapeCollector struct{ src Source }

func newScrapeCollector(src Source) *scrapeCollector { return &scrapeCollector{src: src} }

// Describe implements prometheus.Collector.
func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessionsDesc, inFlightDesc, upDesc, stateDesc, pendingDesc, auditDroppedDesc,
		procUpDesc, procSessDesc, procPendDesc, procRestDesc, procFwdDesc} {
		ch <- d
	}
	for _, cd := range counterDescs {
		ch <- cd.desc
	}
}

// Collect implements prometheus.Collector.
func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.src.Sessions() {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(s.N), s.Kind, s.Target, s.Era)
	}
	ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(c.src.InFlight()))
	for _, s := range c.src.Servers() {
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, bit(s.Up), s.Name)
		for _, st := range States {
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, bit(s.State == st), s.Name, st)
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.Pending), s.Name)
		if s.Counters != nil {
			for _, cd := range counterDescs {
				ch <- prometheus.MustNewConstMetric(cd.desc, prometheus.CounterValue, float64(cd.get(s.Counters)), s.Name)
			}
		}
		for i, p := range s.Processes {
			idx := strconv.Itoa(i)
			ch <- prometheus.MustNewConstMetric(procUpDesc, prometheus.GaugeValue, bit(p.Up), s.Name, idx)
			ch <- prometheus.MustNewConstMetric(procSessDesc, prometheus.GaugeValue, float64(p.Sessions), s.Name, idx)
			ch <- prometheus.MustNewConstMetric(procPendDesc, prometheus.GaugeValue, float64(p.Pending), s.Name, idx)
			ch <- prometheus.MustNewConstMetric(procRestDesc, prometheus.CounterValue, float64(p.Restarts), s.Name, idx)
			ch <- prometheus.MustNewConstMetric(procFwdDesc, prometheus.CounterValue, float64(p.Forwarded), s.Name, idx)
		}
	}
	if n, ok := c.src.AuditDropped(); ok {
		ch <- prometheus.MustNewConstMetric(auditDroppedDesc, prometheus.CounterValue, float64(n))
	}
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var _ prometheus.Collector = (*scrapeCollector)(nil)
