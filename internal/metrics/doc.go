// Package metrics is the gateway's Prometheus metrics (GET /metrics): a
// private registry per gateway (tests start many), the Go and process
// collectors, counters fed by the HTTP front's request records
// (Metrics.Request), and the rest read at scrape time from a Source
// (sessions, requests in flight, servers' states, the multiplexers'
// counters), so that nothing is counted twice nor kept in step by hand.
//
// It knows nothing of the gateway's types: the gateway (internal/gateway,
// metrics.go) adapts its handler, servers and audit log to Source and its
// request records to Request. Label values are bounded: targets and
// servers are config names, methods are the known MCP methods (others are
// "other"), outcomes a fixed set; there is no principal label.
//
// Every method is safe for concurrent use.
package metrics
