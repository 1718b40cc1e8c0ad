package metrics

import "github.com/prometheus/client_golang/prometheus"

// This file is the operations' own metrics: which build is running, and
// whether the audit log is being written. Each is registered by the
// gateway when it has the thing (an audit log, a version), apart from the
// Source, so that a gateway without one exports no series for it.

// Build is the running binary's build (`mcpgate version`).
type Build struct {
	Version   string // mcpgate's version, "dev" when unknown
	Commit    string // the VCS revision; "" when unknown
	GoVersion string // runtime.Version()
}

// SetBuild exports b as mcpgate_build_info{version,commit,goversion} 1.
// Call it once, before serving.
func (m *Metrics) SetBuild(b Build) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcpgate_build_info", Help: "Always 1; its labels name the running build (join on it to label other series).",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": b.GoVersion},
	}, func() float64 { return 1 }))
}

// AuditWrites are the audit log's writes that did not go as planned, each
// counter monotonic.
type AuditWrites struct {
	Errors  int64  // writes that failed (a full disk, an I/O error, the file not reopened)
	Lost    int64  // lines those writes lost
	Reopens uint64 // times its file was opened again: rotated, removed, or SIGHUP
}

var (
	auditWriteErrorsDesc = prometheus.NewDesc("mcpgate_audit_write_errors_total",
		"Writes to the audit log that failed (a full disk, an I/O error, a rotated file that could not be reopened).", nil, nil)
	auditLostDesc = prometheus.NewDesc("mcpgate_audit_lost_total",
		"Audit log lines lost because their write failed (mcpgate_audit_dropped_total counts those the full queue dropped).", nil, nil)
	auditReopensDesc = prometheus.NewDesc("mcpgate_audit_reopens_total",
		"Times the audit log's file was opened again: renamed or removed by a rotation, or SIGHUP.", nil, nil)
)

// WatchAudit exports the audit log's write failures and reopens, read by
// read at each scrape (it must be safe for concurrent use and not block).
// Call it once, before serving.
func (m *Metrics) WatchAudit(read func() AuditWrites) {
	m.reg.MustRegister(auditCollector(read))
}

// auditCollector reads the audit log's writes at each scrape.
type auditCollector func() AuditWrites

// Describe implements prometheus.Collector.
func (c auditCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- auditWriteErrorsDesc
	ch <- auditLostDesc
	ch <- auditReopensDesc
}

// Collect implements prometheus.Collector.
func (c auditCollector) Collect(ch chan<- prometheus.Metric) {
	w := c()
	ch <- prometheus.MustNewConstMetric(auditWriteErrorsDesc, prometheus.CounterValue, float64(w.Errors))
	ch <- prometheus.MustNewConstMetric(auditLostDesc, prometheus.CounterValue, float64(w.Lost))
	ch <- prometheus.MustNewConstMetric(auditReopensDesc, prometheus.CounterValue, float64(w.Reopens))
}

var _ prometheus.Collector = auditCollector(nil)
