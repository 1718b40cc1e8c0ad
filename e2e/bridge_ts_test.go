package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const (
	bridgeClientScript  = "bridge_client.mjs"
	bridgeClientTimeout = 2 * time.Minute
)

// bridgeSummary is the JSON summary bridge_client.mjs prints.
type bridgeSummary struct {
	OK       bool `json:"ok"`
	Tools    int  `json:"tools"`
	Echo     bool `json:"echo"`
	Steps    int  `json:"steps"`
	Progress []struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
	} `json:"progress"`
	CloseMs int      `json:"closeMs"`
	Errors  []string `json:"errors"`
}

// TestBridgeTypeScriptThroughGateway: the official TypeScript SDK Client starts
// `mcpgate stdio` as its stdio server; the bridge forwards to `mcpgate serve`
// (Streamable HTTP), which runs the reference server-everything over stdio.
// Tools, an echo and progress notifications all cross both hops.
func TestBridgeTypeScriptThroughGateway(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, bridgeClientScript)
	bin := gatewayBinary(t)
	requireStdioCommand(t, bin)
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"everything": {Command: node22, Args: []string{serverEverything, "stdio"}},
	}})
	runBridgeClient(t, script, bin, base+"/servers/everything/mcp", "auto")
}

// TestBridgeTypeScriptLegacySSE: `mcpgate stdio --transport auto` against
// server-everything in its own legacy SSE mode: the initialize POST is
// refused, and the bridge falls back to HTTP+SSE (2024-11-05).
func TestBridgeTypeScriptLegacySSE(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, bridgeClientScript)
	bin := gatewayBinary(t)
	requireStdioCommand(t, bin)
	addr := startServerEverything(t, "sse")
	runBridgeClient(t, script, bin, "http://"+addr+"/sse", "auto")
}

// requireStdioCommand fails, saying why, when the binary has no stdio
// subcommand yet (cmd/mcpgate/cli.go must dispatch "stdio" to stdioBridge).
func requireStdioCommand(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.Command(bin, "stdio", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s stdio --help: %v (is `case \"stdio\"` in cmd/mcpgate/cli.go?)\n%s", bin, err, out)
	}
}

// runBridgeClient runs bridge_client.mjs and checks its summary.
func runBridgeClient(t *testing.T, script, bin, url, transport string) {
	t.Helper()
	out, err := runNode(t, peersDir, bridgeClientTimeout, script, "--mcpgate", bin, "--url", url, "--transport", transport)
	var sum bridgeSummary
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
		t.Fatalf("client script (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
	}
	for _, e := range sum.Errors {
		t.Errorf("client: %s", e)
	}
	if err != nil {
		t.Fatalf("client script: %v\n%s", err, out)
	}
	// The script checks these itself; checking again keeps a weakened script from passing.
	if !sum.OK || sum.Tools == 0 || !sum.Echo || sum.Steps == 0 || len(sum.Progress) != sum.Steps {
		t.Errorf("summary: %s", out)
	}
	// The SDK closes stdin, then sends SIGTERM after 2s: the bridge must exit on EOF alone.
	if sum.CloseMs < 0 || sum.CloseMs >= 2000 {
		t.Errorf("mcpgate stdio took %dms to exit after stdin closed", sum.CloseMs)
	}
	t.Logf("TypeScript SDK over mcpgate stdio -> %s: %d tools, echo, %d progress notifications; exited %dms after stdin closed",
		url, sum.Tools, len(sum.Progress), sum.CloseMs)
}
