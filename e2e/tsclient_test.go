package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

const (
	everythingClientScript = "everything_client.mjs"
	tsClients              = 10
	tsClientTimeout        = 3 * time.Minute
)

// tsSummary is the JSON summary everything_client.mjs prints.
type tsSummary struct {
	OK      bool `json:"ok"`
	Clients int  `json:"clients"`
	Failed  int  `json:"failed"`
	Results []struct {
		Client   int  `json:"client"`
		Tools    int  `json:"tools"`
		Echo     bool `json:"echo"`
		Sum      bool `json:"sum"`
		Steps    int  `json:"steps"`
		Progress []struct {
			Progress float64 `json:"progress"`
			Total    float64 `json:"total"`
		} `json:"progress"`
		Errors []string `json:"errors"`
	} `json:"results"`
}

// TestTypeScriptClientEverything puts the reference server-everything (stdio) behind the
// gateway and has ten official TypeScript SDK clients use it at once: each lists the tools,
// echoes its own message, sums its own numbers and runs a long operation with its own number of
// progress steps, all concurrently. Every client uses the same JSON-RPC ids and progress tokens,
// so a reply or a progress notification routed to the wrong session shows up as a mismatch.
func TestTypeScriptClientEverything(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, everythingClientScript)
	for _, isolation := range []string{"shared", "session"} {
		t.Run(isolation, func(t *testing.T) {
			base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
				"everything": {Command: node22, Args: []string{serverEverything, "stdio"}, Isolation: isolation},
			}})
			runEverythingClient(t, script, base+"/servers/everything/mcp")
		})
	}
}

// TestTypeScriptSSEClient does the same with the SDK's legacy SSEClientTransport (2024-11-05),
// on one shared process, through /servers/{name}/sse and through the fallback on the
// Streamable HTTP URL /servers/{name}/mcp.
func TestTypeScriptSSEClient(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, everythingClientScript)
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"everything": {Command: node22, Args: []string{serverEverything, "stdio"}},
	}})
	for _, path := range []string{"/servers/everything/sse", "/servers/everything/mcp"} {
		t.Run(strings.TrimPrefix(path, "/servers/everything/"), func(t *testing.T) {
			runEverythingClient(t, script, base+path, "--transport", "sse")
		})
	}
}

// TestTypeScriptClientRemoteUpstreams puts server-everything behind the gateway as a remote
// upstream, in its Streamable HTTP mode ("type": "http") and its legacy SSE mode ("type":
// "sse"), and runs the same concurrent clients through the gateway's Streamable HTTP endpoint.
func TestTypeScriptClientRemoteUpstreams(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, everythingClientScript)
	for _, mode := range []struct{ typ, arg, path string }{{"http", "streamableHttp", "/mcp"}, {"sse", "sse", "/sse"}} {
		t.Run(mode.typ, func(t *testing.T) {
			addr := startServerEverything(t, mode.arg)
			base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
				"remote": {Type: mode.typ, URL: "http://" + addr + mode.path},
			}})
			runEverythingClient(t, script, base+"/servers/remote/mcp")
		})
	}
}

// TestTypeScriptClientBaseline runs the same client script against server-everything served
// directly in its own Streamable HTTP mode, proving the script and its checks against the
// reference implementation.
func TestTypeScriptClientBaseline(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, everythingClientScript)
	addr := startServerEverything(t, "streamableHttp")
	runEverythingClient(t, script, "http://"+addr+"/mcp")
}

// TestTypeScriptSSEClientBaseline runs the legacy SSE variant against server-everything's own
// SSE mode: the reference for what the legacy transport delivers without a gateway.
func TestTypeScriptSSEClientBaseline(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, everythingClientScript)
	addr := startServerEverything(t, "sse")
	runEverythingClient(t, script, "http://"+addr+"/sse", "--transport", "sse")
}

// startServerEverything serves the reference server-everything over HTTP in
// mode ("streamableHttp" at /mcp or "sse" at /sse) until the test ends, and
// returns its address.
func startServerEverything(t *testing.T, mode string) string {
	t.Helper()
	addr := testkit.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(node22, serverEverything, mode)
	cmd.Env = append(os.Environ(), "PORT="+port)
	p := startProcess(t, "server-everything-"+mode, cmd, nil)
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM, 10*time.Second, false) })
	waitListening(t, p, addr)
	return addr
}

// runEverythingClient runs everything_client.mjs against url and checks its exit status and its
// summary.
func runEverythingClient(t *testing.T, script, url string, extra ...string) {
	t.Helper()
	runEverythingClientN(t, script, url, tsClients, extra...)
}

// runEverythingClientN is runEverythingClient with clients clients.
func runEverythingClientN(t *testing.T, script, url string, clients int, extra ...string) {
	t.Helper()
	start := time.Now()
	args := append([]string{script, "--url", url, "--clients", strconv.Itoa(clients)}, extra...)
	out, err := runNode(t, peersDir, tsClientTimeout, args...)
	elapsed := time.Since(start).Round(time.Millisecond)

	var sum tsSummary
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
		t.Fatalf("client script (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
	}
	for _, r := range sum.Results {
		for _, e := range r.Errors {
			t.Errorf("client %d: %s", r.Client, e)
		}
	}
	if err != nil {
		t.Fatalf("client script: %v", err)
	}
	if !sum.OK || sum.Clients != clients || len(sum.Results) != clients {
		t.Fatalf("summary: ok=%v clients=%d results=%d, want ok with %d clients\n%s",
			sum.OK, sum.Clients, len(sum.Results), clients, out)
	}
	// The script checks these itself; checking again here keeps a weakened script from passing.
	progress := 0
	for _, r := range sum.Results {
		if r.Tools == 0 || !r.Echo || !r.Sum || r.Steps == 0 || len(r.Progress) != r.Steps {
			t.Errorf("client %d: tools=%d echo=%v sum=%v progress %d of %d steps",
				r.Client, r.Tools, r.Echo, r.Sum, len(r.Progress), r.Steps)
		}
		progress += len(r.Progress)
	}
	t.Logf("%d TypeScript clients against %s: all checks passed, %d progress notifications each routed to its own client (%v)",
		clients, url, progress, elapsed)
}

// installScript copies e2e/js/NAME next to the installed node_modules (ES modules resolve
// packages from their own directory) and returns the copy's path. Copying on every run keeps
// the copy in step with the source even when scripts/peers.sh was not re-run.
func installScript(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "e2e", "js", name))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(peersDir, name)
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
