package gateway

import (
	"runtime"
	"runtime/debug"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/logfile"
	"github.com/mcpgate/mcpgate/internal/metrics"
)

// This file adds the operations' metrics to gateway.metrics: the build
// running, and the audit log's failed writes and reopens.

// Commit is the VCS revision of the running build, the commit label of
// mcpgate_build_info. cmd/mcpgate sets it with Version (its link-time
// value, else the build info's); the default is the build info's
// vcs.revision, or "".
var Commit = vcsRevision()

func vcsRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

// exportOps registers the build and, with an audit log (au; its file f,
// nil for stderr), its writes on m.
func exportOps(m *metrics.Metrics, au *audit.Auditor, f *logfile.File) {
	m.SetBuild(metrics.Build{Version: Version, Commit: Commit, GoVersion: runtime.Version()})
	if au == nil {
		return
	}
	m.WatchAudit(func() metrics.AuditWrites {
		ws := au.WriteStats()
		w := metrics.AuditWrites{Errors: ws.Errors, Lost: ws.Lost}
		if f != nil {
			w.Reopens = f.Reopens()
		}
		return w
	})
}
