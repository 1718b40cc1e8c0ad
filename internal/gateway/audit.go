package gateway

import (
	"fmt"
	"os"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/httpapi"
)

// openAudit opens the audit log of gateway.audit (nil: none): the file,
// appended to, or stderr for "-". close writes the lines queued and
// closes the file.
func openAudit(a *config.Audit) (au *httpapi.Auditor, closeFn func(), err error) {
	if a == nil {
		return nil, func() {}, nil
	}
	if a.File == "-" {
		au = httpapi.NewAuditor(os.Stderr, a.Arguments)
		return au, au.Close, nil
	}
	f, err := os.OpenFile(a.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway.audit.file: %w", err)
	}
	au = httpapi.NewAuditor(f, a.Arguments)
	return au, func() {
		au.Close()
		_ = f.Close()
	}, nil
}

// limits maps gateway.limits onto the HTTP front's (nil: none).
func limits(l *config.Limits) *httpapi.Limits {
	if l == nil {
		return nil
	}
	return &httpapi.Limits{
		RequestsPerSecond: l.RequestsPerSecond, Burst: l.Burst, MaxInFlight: l.MaxInFlight,
		MaxSessions: l.MaxSessions, ToolsPerSecond: l.ToolsPerSecond, ToolBurst: l.ToolBurst,
		MaxInFlightTotal: l.MaxInFlightTotal,
	}
}
