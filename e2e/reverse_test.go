package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// reverseClients is how many TypeScript SDK clients share the reverse bridge at once.
const reverseClients = 4

// TestTypeScriptClientReverseBridge puts the Go SDK's conformance server behind the gateway
// pinned to 2026-07-28 ("protocol"), so the gateway runs no initialized process for it, and has
// official TypeScript SDK clients of the session eras use it at once through the reverse
// bridge: initialize answered from server/discover; the server's input_required results
// (elicitation, sampling, roots, several at once, several rounds, with requestState, on
// tools/call and prompts/get) turned into server requests on each client's own stream and
// retried with the answers; logging/setLevel kept for the requests that follow; and
// tools/list_changed delivered from the listen the gateway holds for each session.
func TestTypeScriptClientReverseBridge(t *testing.T) {
	requirePeers(t, node22, everythingServer)
	script := installScript(t, "reverse_client.mjs")
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"modern": {Command: everythingServer, Protocol: "2026-07-28"},
	}})
	runReverseClient(t, script, base+"/servers/modern/mcp", true)
}

// runReverseClient runs reverse_client.mjs against url and checks its
// summary; without logging, the script leaves out its logging step.
func runReverseClient(t *testing.T, script, url string, logging bool) {
	t.Helper()
	args := []string{script, "--url", url, "--clients", strconv.Itoa(reverseClients)}
	if !logging {
		args = append(args, "--no-logging")
	}
	out, err := runNode(t, peersDir, tsClientTimeout, args...)
	var sum struct {
		OK      bool `json:"ok"`
		Clients int  `json:"clients"`
		Results []struct {
			Client int      `json:"client"`
			Checks []string `json:"checks"`
			Asked  struct {
				Sampling, Elicitation, Roots int
			} `json:"asked"`
			Logs        int      `json:"logs"`
			ListChanged int      `json:"listChanged"`
			Errors      []string `json:"errors"`
		} `json:"results"`
	}
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
		t.Fatalf("client script (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
	}
	for _, r := range sum.Results {
		for _, e := range r.Errors {
			t.Errorf("client %d: %s", r.Client, e)
		}
	}
	if err != nil || !sum.OK || len(sum.Results) != reverseClients {
		t.Fatalf("client script: %v; ok=%v results=%d\n%s", err, sum.OK, len(sum.Results), out)
	}
	// The script checks these itself; checking again here keeps a weakened script from passing.
	checks, logs := 9, 3
	if !logging {
		checks, logs = 8, 0
	}
	for _, r := range sum.Results {
		if len(r.Checks) != checks || r.Asked.Elicitation < 6 || r.Asked.Sampling < 2 || r.Asked.Roots < 2 || r.Logs < logs || r.ListChanged < 1 {
			t.Errorf("client %d: checks %v, asked %+v, %d logs, %d list_changed", r.Client, r.Checks, r.Asked, r.Logs, r.ListChanged)
		}
	}
}
