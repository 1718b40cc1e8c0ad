package gateway

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/logfile"
)

// openAudit opens the audit log of gateway.audit (nil: none): the file,
// appended to and reopened when rotated (file, for SIGHUP: reopenAudit),
// or stderr for "-". Write errors are logged on log. close writes the
// lines queued and closes the file.
func openAudit(a *config.Audit, log *slog.Logger) (au *front.Auditor, file *logfile.File, closeFn func(), err error) {
	if a == nil {
		return nil, nil, func() {}, nil
	}
	o := front.AuditOptions{Arguments: a.Arguments, Logger: log, Name: a.File}
	if a.File == "-" {
		au = front.NewAuditorWith(os.Stderr, o)
		return au, nil, au.Close, nil
	}
	f, err := logfile.Open(a.File, 0o600)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway.audit.file: %w", err)
	}
	au = front.NewAuditorWith(f, o)
	return au, f, func() {
		au.Close()
		_ = f.Close()
	}, nil
}

// reopenAudit makes the audit log's file be opened again before its next
// write (SIGHUP: a rotation tool's postrotate signal). A rename or removal
// of the file is noticed without it (internal/logfile).
func (g *Gateway) reopenAudit() {
	if g.auditFile != nil {
		g.auditFile.Reopen()
		g.log.Info("reopening the audit log", "file", g.auditFile.Name())
	}
}

// limits maps gateway.limits onto the HTTP front's (nil: none).
func limits(l *config.Limits) *front.Limits {
	if l == nil {
		return nil
	}
	return &front.Limits{
		RequestsPerSecond: l.RequestsPerSecond, Burst: l.Burst, MaxInFlight: l.MaxInFlight,
		MaxSessions: l.MaxSessions, ToolsPerSecond: l.ToolsPerSecond, ToolBurst: l.ToolBurst,
		MaxInFlightTotal: l.MaxInFlightTotal,
	}
}
