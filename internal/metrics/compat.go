package metrics

import "github.com/prometheus/client_golang/prometheus"

// This file exports the HTTP front's counters of client quirks: versions
// it accepted though the MCP-Protocol-Version header did not match, and
// requests sent without an id that it dropped. They are kept by the front
// and read at scrape time, as the other counters kept elsewhere.

// CompatSource is an optional interface of a Source: a Source with it
// gets the metrics of this file.
type CompatSource interface {
	// Compat returns the counters now. Same rules as Source's methods.
	Compat() Compat
}

// Compat is the HTTP front's counters of client quirks, each monotonic.
type Compat struct {
	// VersionHeaderMismatch counts requests served though their
	// MCP-Protocol-Version did not match, by kind: body_newer (a
	// 2026-07-28 body under an older header), session_other (on a
	// session, another supported version), repeated (one version more
	// than once).
	VersionHeaderMismatch map[string]uint64
	// RequestsWithoutID counts request methods sent without an id,
	// dropped, by transport: streamable, batch, legacy_sse, stateless.
	RequestsWithoutID map[string]uint64
	// InitializedWithoutSession counts notifications/initialized POSTed
	// without Mcp-Session-Id (answered 202).
	InitializedWithoutSession uint64
}

var (
	versionMismatchDesc = prometheus.NewDesc("mcpgate_version_header_mismatch_total",
		"Requests served though MCP-Protocol-Version did not match (kind: body_newer, session_other, repeated).", []string{"kind"}, nil)
	withoutIDDesc = prometheus.NewDesc("mcpgate_requests_without_id_dropped_total",
		"Request methods sent without an id, dropped and never forwarded, by transport.", []string{"transport"}, nil)
	initializedDesc = prometheus.NewDesc("mcpgate_initialized_without_session_total",
		"notifications/initialized POSTed without Mcp-Session-Id (answered 202, dropped).", nil, nil)
)

// compatCollector reads a CompatSource at each scrape.
type compatCollector struct{ src CompatSource }

// Describe implements prometheus.Collector.
func (c compatCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- versionMismatchDesc
	ch <- withoutIDDesc
	ch <- initializedDesc
}

// Collect implements prometheus.Collector.
func (c compatCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.src.Compat()
	for kind, v := range n.VersionHeaderMismatch {
		ch <- prometheus.MustNewConstMetric(versionMismatchDesc, prometheus.CounterValue, float64(v), kind)
	}
	for transport, v := range n.RequestsWithoutID {
		ch <- prometheus.MustNewConstMetric(withoutIDDesc, prometheus.CounterValue, float64(v), transport)
	}
	ch <- prometheus.MustNewConstMetric(initializedDesc, prometheus.CounterValue, float64(n.InitializedWithoutSession))
}
