package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// stubReload replaces runGateway and records the reload options serve
// handed it.
func stubReload(t *testing.T) *gateway.ReloadOptions {
	t.Helper()
	got := &gateway.ReloadOptions{}
	old := runGateway
	t.Cleanup(func() { runGateway = old })
	runGateway = func(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
		*got = reloadOptions(ctx)
		return nil
	}
	return got
}

// TestServeReloadOptions: serve --config hands the gateway the file, the
// SIGHUP channel, --watch, and a loader that reads the file as serve did
// (the flags still override it) and refuses a file with problems.
func TestServeReloadOptions(t *testing.T) {
	file := writeFile(t, "c.json", `{"mcpServers": {"m": {"command": "x"}}, "gateway": {"listen": "127.0.0.1:9"}}`)
	opts := stubReload(t)
	if r := runCLI("serve", "--config", file, "--listen", "127.0.0.1:0"); r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	if opts.Path != file || !opts.Watch || opts.Trigger == nil || opts.Load == nil {
		t.Fatalf("reload options %+v", opts)
	}
	if err := os.WriteFile(file, []byte(`{"mcpServers": {"m": {"command": "x"}, "n": {"command": "y"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := opts.Load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.Listen != "127.0.0.1:0" || len(cfg.Servers) != 2 {
		t.Errorf("reloaded config: listen %q, %d servers; want the --listen override and 2 servers", cfg.Gateway.Listen, len(cfg.Servers))
	}
	if err := os.WriteFile(file, []byte(`{"mcpServers": {"m": {"commnd": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps config.Problems
	if _, err := opts.Load(); !errors.As(err, &ps) {
		t.Errorf("broken file: %v, want config problems", err)
	}

	if r := runCLI("serve", "--config", file, "--watch=false"); r.code != 1 {
		// The file is broken now: serve refuses it before anything.
		t.Fatalf("serve of a broken file: code %d", r.code)
	}
	if err := os.WriteFile(file, []byte(`{"mcpServers": {"m": {"command": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	*opts = gateway.ReloadOptions{}
	if r := runCLI("serve", "--config", file, "--watch=false"); r.code != 0 || opts.Watch || opts.Trigger == nil {
		t.Errorf("--watch=false: code %d, options %+v", r.code, opts)
	}
}

// TestServeCommandNoReload: serve -- COMMAND has no file to reload.
func TestServeCommandNoReload(t *testing.T) {
	opts := stubReload(t)
	if r := runCLI("serve", "--", "cat"); r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	if opts.Path != "" || opts.Trigger != nil || opts.Load != nil {
		t.Errorf("reload options %+v, want none", opts)
	}
}

func TestServeHelpNamesWatch(t *testing.T) {
	r := runCLI("serve", "--help")
	if !strings.Contains(r.stdout, "--watch") || !strings.Contains(r.stdout, "SIGHUP") {
		t.Errorf("serve --help does not document --watch and SIGHUP:\n%s", r.stdout)
	}
}
