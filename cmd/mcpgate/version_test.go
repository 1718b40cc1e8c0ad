package main

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// TestServeHandsVersionToGateway: the version set with -X main.version is
// the one the gateway sends to servers as clientInfo.version.
func TestServeHandsVersionToGateway(t *testing.T) {
	oldVersion, oldGateway := version, gateway.Version
	t.Cleanup(func() { version, gateway.Version = oldVersion, oldGateway })
	version = "9.8.7-test"
	var seen string
	old := runGateway
	t.Cleanup(func() { runGateway = old })
	runGateway = func(context.Context, *config.Config, *slog.Logger) error {
		seen = gateway.Version
		return nil
	}
	if r := runCLI("serve", "--", "cat"); r.code != 0 {
		t.Fatalf("serve: %+v", r)
	}
	if seen != "9.8.7-test" {
		t.Errorf("gateway.Version during serve = %q, want the -X main.version value", seen)
	}
}

// TestLdflagsVersion builds the binary the way a release does and checks
// that `mcpgate version` prints the version given at link time.
func TestLdflagsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcpgate")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=1.2.3-ldflags", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "mcpgate 1.2.3-ldflags\n") {
		t.Errorf("mcpgate version = %q", out)
	}
}
