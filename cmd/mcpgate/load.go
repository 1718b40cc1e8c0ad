package main

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// projectUsage is the --project flag's help, shared by serve and validate.
const projectUsage = "with Claude Code's ~/.claude.json, also serve the servers of project `PATH`\n" +
	"(projects.PATH.mcpServers, over the top-level ones); relative to the\ncurrent directory"

// loadConfig reads the config file at path as serve, its reloads and
// validate do: any client's format (config/formats.go), the Claude Code
// project given by --project (made absolute, as Claude Code keys its
// projects), its policies compiled. The error is config.Problems for a
// bad file.
func loadConfig(path, project string) (*config.Config, error) {
	opts := config.Options{}
	if project != "" {
		abs, err := filepath.Abs(project)
		if err != nil {
			return nil, fmt.Errorf("--project: %w", err)
		}
		opts.Project = abs
	}
	cfg, err := config.LoadWith(path, opts)
	if err == nil {
		err = gateway.CheckPolicies(cfg)
	}
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// logNotes logs, at info, each key of cfg that was accepted and ignored
// (another client's "autoApprove"), naming its server.
func logNotes(log *slog.Logger, cfg *config.Config) {
	for _, n := range cfg.Notes {
		log.Info("config key ignored", "server", n.Server, "key", n.Path, "why", n.Msg)
	}
}

// printNotes writes cfg's notes for validate, one a line.
func printNotes(w io.Writer, file string, cfg *config.Config) {
	for _, n := range cfg.Notes {
		fmt.Fprintf(w, "%s: note: %s\n", file, n)
	}
}
