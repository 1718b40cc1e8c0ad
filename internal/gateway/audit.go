package gateway

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/logfile"
)

// openAudit opens the audit log of gateway.audit (nil: none): the file,
// appended to and reopened when rotated (file, for SIGHUP: reopenAudit),
// or stderr for "-". Write errors are logged on log. close writes the
// lines queued and closes the file.
func openAudit(a *config.Audit, log *slog.Logger) (au *audit.Auditor, file *logfile.File, closeFn func(), err error) {
	if a == nil {
		return nil, nil, func() {}, nil
	}
	o := audit.Options{Arguments: a.Arguments, Logger: log, Name: a.File}
	if a.File == "-" {
		au = audit.NewWith(os.Stderr, o)
		return au, nil, au.Close, nil
	}
	f, err := logfile.Open(a.File, 0o600)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway.audit.file: %w", err)
	}
	au = audit.NewWith(f, o)
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

// limitsOf maps gateway.limits onto the limits' Config (nil: none).
func limitsOf(l *config.Limits) *limits.Config {
	if l == nil {
		return nil
	}
	return &limits.Config{
		RequestsPerSecond: l.RequestsPerSecond, Burst: l.Burst, MaxInFlight: l.MaxInFlight,
		MaxSessions: l.MaxSessions, ToolsPerSecond: l.ToolsPerSecond, ToolBurst: l.ToolBurst,
		MaxInFlightTotal: l.MaxInFlightTotal,
	}
}
