package gateway

import (
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/servers"
)

// CommandProblem is a stdio server whose command cannot be started as
// configured (not found, not executable, missing working directory).
type CommandProblem struct {
	Server   string // the server's name
	Key      string // the server's key at fault: "command" or "cwd"
	Critical bool   // the server is marked "critical": the gateway will not start
	Err      error  // the cause, e.g. "command not found: uvx"
}

// Error returns `server "NAME": CAUSE`.
func (p CommandProblem) Error() string {
	return fmt.Sprintf("server %q: %v", p.Server, p.Err)
}

// Unwrap returns the cause.
func (p CommandProblem) Unwrap() error { return p.Err }

// CheckCommands returns, sorted by server name, every stdio server of cfg
// whose command cannot be started now. It starts nothing. `validate`
// reports them as warnings; Start refuses to start when one is critical.
func CheckCommands(cfg *config.Config) []CommandProblem {
	var ps []CommandProblem
	for _, name := range cfg.Names() {
		s := cfg.Servers[name]
		if err := servers.CheckCommand(s); err != nil {
			key := "command"
			if errors.Is(err, servers.ErrBadCwd) {
				key = "cwd"
			}
			ps = append(ps, CommandProblem{Server: name, Key: key, Critical: s.Critical, Err: err})
		}
	}
	return ps
}

// checkCritical returns an error naming every critical server that cannot
// start, each with its cause, or nil.
func checkCritical(ps []CommandProblem) error {
	var errs []error
	for _, p := range ps {
		if p.Critical {
			errs = append(errs, fmt.Errorf("critical server %q cannot start: %w", p.Server, p.Err))
		}
	}
	return errors.Join(errs...)
}
