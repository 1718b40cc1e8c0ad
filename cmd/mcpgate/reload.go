package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// This file wires hot reload into serve: with --config, SIGHUP reloads the
// file, and so does a change of it unless --watch=false. The reload reads
// the file as serve read it at start (the flags still override it), and
// the gateway applies it or, when it has problems, logs them and keeps the
// old one (gateway/reload.go).

// reloadKey carries serve's reload options to runGateway in its context,
// so that runGateway keeps the signature tests stub.
type reloadKey struct{}

// withReload returns ctx carrying opts for runGateway.
func withReload(ctx context.Context, opts gateway.ReloadOptions) context.Context {
	return context.WithValue(ctx, reloadKey{}, opts)
}

// reloadOptions returns the options withReload put in ctx (zero: none).
func reloadOptions(ctx context.Context) gateway.ReloadOptions {
	opts, _ := ctx.Value(reloadKey{}).(gateway.ReloadOptions)
	return opts
}

// runWithReload runs the gateway with the reload options in ctx.
func runWithReload(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	return gateway.RunWith(ctx, cfg, log, reloadOptions(ctx))
}

// serveReload returns the reload options of `serve --config path
// [--project project]`: sighup is the SIGHUP channel (signal.Notify's, or
// a test's), override applies the command-line flags over each new config
// as over the first; the new config's ignored keys are logged on log.
func serveReload(path, project string, watch bool, sighup <-chan os.Signal, override func(*config.Config), log *slog.Logger) gateway.ReloadOptions {
	return gateway.ReloadOptions{
		Path: path, Watch: watch, Trigger: sighup,
		Load: func() (*config.Config, error) {
			cfg, err := loadConfig(path, project)
			if err != nil {
				return nil, err
			}
			override(cfg)
			if err := cfg.Validate(); err != nil {
				return nil, err
			}
			logNotes(log, cfg)
			return cfg, nil
		},
	}
}
