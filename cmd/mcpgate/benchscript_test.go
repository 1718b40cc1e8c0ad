package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// asCLI, set in a child's environment, makes this test binary run as the
// mcpgate command line, so that scripts can be tested against the
// gateway of this very tree.
const asCLI = "MCPGATE_TEST_AS_CLI"

func init() {
	if os.Getenv(asCLI) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// processesSupport runs scripts/bench-lib.sh's processes_support against
// the gateway command gate and returns what it printed.
func processesSupport(t *testing.T, gate string) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-c",
		`source scripts/bench-lib.sh; dir=$1; echo_bin=$2; processes_support "$3"`, "_", t.TempDir(), os.Args[0], gate)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), asCLI+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("processes_support %s: %v\n%s", gate, err, out)
	}
	return strings.TrimSpace(string(out))
}

// fakeGate writes a script that answers `validate --config FILE` with
// "FILE: " and output, and exit code, as a gateway build would.
func fakeGate(t *testing.T, output string, code int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcpgate")
	script := "#!/bin/sh\n[ \"$1 $2\" = 'validate --config' ] || exit 2\nprintf '%s: %s\\n' \"$3\" '" + output + "'\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchProcessesDetection: the benchmark runs its processes rows only
// when the gateway accepts mcpServers.NAME.processes. Against this tree's
// gateway (this test binary as the command line) the script's answer is
// the config package's, whichever it is; against builds that accept and
// refuse the key it says so, with the refusal's reason.
func TestBenchProcessesDetection(t *testing.T) {
	_, err := config.Parse([]byte(`{"mcpServers": {"echo": {"command": "`+os.Args[0]+`", "isolation": "shared", "processes": 2}}}`), nil)
	got := processesSupport(t, os.Args[0])
	switch {
	case err == nil && got != "yes":
		t.Errorf("this build accepts processes, but the script says %q", got)
	case err != nil && (!strings.HasPrefix(got, "no: ") || !strings.Contains(got, "processes")):
		t.Errorf("this build refuses processes (%v), but the script says %q", err, got)
	}
	if got := processesSupport(t, fakeGate(t, "ok (1 server)", 0)); got != "yes" {
		t.Errorf("a build that validates the config: %q, want yes", got)
	}
	got = processesSupport(t, fakeGate(t, "mcpServers.echo.processes: unknown key", 1))
	if got != "no: mcpServers.echo.processes: unknown key" {
		t.Errorf("a build that refuses the key: %q", got)
	}
}
