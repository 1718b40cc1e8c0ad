package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// suites are the conformance suite runs: the stable release, and the alpha restricted to the
// 2025-11-25 spec (its other scenarios belong to the 2026-07-28 era).
var suites = []struct {
	name string
	args []string
}{
	{"stable", nil},
	{"alpha", []string{"--spec-version", "2025-11-25"}},
}

// conformanceTimeout bounds one suite run; passing runs take a few seconds, but each scenario
// that hangs costs the suite's own 30s timeout.
const conformanceTimeout = 4 * time.Minute

var conformanceTotal = regexp.MustCompile(`(?m)^Total: (\d+) passed, (\d+) failed`)

// TestConformance runs the official MCP conformance suite against the Go SDK's conformance
// server behind the gateway, in each isolation mode. The same server served directly passes
// everything (TestConformanceBaseline), so any failure here is the gateway's.
func TestConformance(t *testing.T) {
	requirePeers(t, node22, everythingServer, conformanceJS["stable"], conformanceJS["alpha"])
	for _, isolation := range []string{"shared", "session"} {
		t.Run(isolation, func(t *testing.T) {
			base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
				"everything": {Command: everythingServer, Isolation: isolation},
			}})
			url := base + "/servers/everything/mcp"
			for _, s := range suites {
				t.Run(s.name, func(t *testing.T) { runConformance(t, s.name, url, s.args...) })
			}
		})
	}
}

// TestConformanceRemote runs the suites through a chain: the gateway with a remote Streamable
// HTTP upstream, the Go SDK's conformance server served over HTTP.
func TestConformanceRemote(t *testing.T) {
	requirePeers(t, node22, everythingServer, conformanceJS["stable"], conformanceJS["alpha"])
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"remote": {Type: "http", URL: startEverythingHTTP(t)},
	}})
	url := base + "/servers/remote/mcp"
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) { runConformance(t, s.name, url, s.args...) })
	}
}

// TestConformanceBaseline runs the suites against the Go SDK's conformance server served
// directly over Streamable HTTP, without the gateway. It proves that the suite, Node 22 and the
// server are installed and agree, so that a TestConformance failure points at the gateway.
func TestConformanceBaseline(t *testing.T) {
	requirePeers(t, node22, everythingServer, conformanceJS["stable"], conformanceJS["alpha"])
	url := startEverythingHTTP(t)
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) { runConformance(t, s.name, url, s.args...) })
	}
}

// startEverythingHTTP serves the Go SDK's conformance server over Streamable HTTP (stateful)
// until the test ends and returns its endpoint URL.
func startEverythingHTTP(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(everythingServer, "-http", addr, "-stateless=false")
	p := startProcess(t, "everything-server", cmd, nil)
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM, 10*time.Second, false) })
	waitListening(t, p, addr, 30*time.Second)
	return "http://" + addr + "/mcp"
}

// runConformance runs one conformance suite against url and fails the test unless every check
// passed (and at least one ran). A failure message names the failing scenarios and the checks
// that failed or warned, from their checks.json.
func runConformance(t *testing.T, suite, url string, extra ...string) {
	t.Helper()
	outDir := t.TempDir()
	args := append([]string{conformanceJS[suite], "server", "--url", url, "-o", outDir}, extra...)
	start := time.Now()
	out, err := runNode(t, peersDir, conformanceTimeout, args...)
	elapsed := time.Since(start).Round(time.Millisecond)

	m := conformanceTotal.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s suite against %s printed no Total line (exit: %v); output:\n%s", suite, url, err, out)
	}
	passed, _ := strconv.Atoi(m[1])
	failed, _ := strconv.Atoi(m[2])
	t.Logf("%s conformance against %s: %d passed, %d failed (%v)", suite, url, passed, failed, elapsed)
	if failed == 0 && passed > 0 {
		if err != nil {
			t.Logf("suite exited with %v despite 0 failures", err)
		}
		return
	}

	var report strings.Builder
	fmt.Fprintf(&report, "%s conformance against %s: %d passed, %d failed\n", suite, url, passed, failed)
	for line := range strings.Lines(out) {
		if !strings.HasPrefix(line, "✗") {
			continue
		}
		report.WriteString(line)
		// "✗ scenario-name: P passed, F failed"
		scenario, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "✗")), ":")
		report.WriteString(failedChecks(outDir, scenario))
	}
	if passed == 0 {
		fmt.Fprintf(&report, "no check passed; full output:\n%s", out)
	}
	t.Error(report.String())
}

// failedChecks returns the checks of one scenario's checks.json (under outDir, in a directory
// named "server-SCENARIO-TIMESTAMP") whose status is not SUCCESS, indented for a report.
func failedChecks(outDir, scenario string) string {
	files, _ := filepath.Glob(filepath.Join(outDir, "server-"+scenario+"-*", "checks.json"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "    (%v)\n", err)
			continue
		}
		var checks []map[string]any
		if err := json.Unmarshal(data, &checks); err != nil {
			fmt.Fprintf(&b, "    (%s: %v)\n", f, err)
			continue
		}
		for _, c := range checks {
			if c["status"] == "SUCCESS" {
				continue
			}
			delete(c, "specReferences") // links to the spec: long and the same every run
			js, _ := json.MarshalIndent(c, "    ", "  ")
			fmt.Fprintf(&b, "    %s\n", js)
		}
	}
	if len(files) == 0 {
		fmt.Fprintf(&b, "    (no checks.json for %s under %s)\n", scenario, outDir)
	}
	return b.String()
}
