package gateway

import (
	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/config"
)

// Servers with "disabled": true (config.Config.Disabled) are never
// started; /readyz, the admin API and the status page list them with the
// state "disabled", so that a user who copied a client's config sees
// why a server is missing. They do not make the gateway unready: the
// user turned them off.

// stateDisabled is the state of a disabled server.
const stateDisabled = "disabled"

// addDisabledReady adds cfg's disabled servers to r.
func addDisabledReady(r *ReadyReport, cfg *config.Config) {
	for name, s := range cfg.Disabled {
		r.Servers[name] = ServerReady{State: stateDisabled, Disabled: true, Critical: s.Critical}
	}
}

// disabledAdmin lists cfg's disabled servers as the admin API reports
// them.
func disabledAdmin(cfg *config.Config) []admin.Server {
	out := make([]admin.Server, 0, len(cfg.Disabled))
	for name, s := range cfg.Disabled {
		out = append(out, admin.Server{Name: name, Type: s.Type, Isolation: string(s.Isolation), State: stateDisabled, Disabled: true})
	}
	return out
}
