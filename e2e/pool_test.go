package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestTypeScriptSamplingPool puts server-everything behind the gateway as a
// shared server with "processes": 4 and has four official TypeScript SDK
// clients, each declaring sampling and answering it with a text of its
// own, call trigger-sampling-request at once, three times each: the server
// asks for sampling during each call. On one shared process four sessions
// with calls in flight make every such request unattributable (refused);
// with a pool each client that declared sampling is placed on a process of
// its own, so each sampling request reaches the session whose call caused
// it, and each call's result holds its own client's text.
func TestTypeScriptSamplingPool(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, "sampling_client.mjs")
	const clients = 4
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"everything": {Command: node22, Args: []string{serverEverything, "stdio"}, Processes: clients},
	}})
	out, err := runNode(t, peersDir, tsClientTimeout, script, "--url", base+"/servers/everything/mcp", "--clients", strconv.Itoa(clients))
	var sum struct {
		OK      bool `json:"ok"`
		Results []struct {
			Client  int      `json:"client"`
			Sampled int      `json:"sampled"`
			OK      bool     `json:"ok"`
			Errors  []string `json:"errors"`
		} `json:"results"`
	}
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
		t.Fatalf("client script (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
	}
	for _, r := range sum.Results {
		for _, e := range r.Errors {
			t.Errorf("client %d: %s", r.Client, e)
		}
		if !r.OK || r.Sampled != 3 {
			t.Errorf("client %d: ok=%v, %d sampling requests answered, want 3", r.Client, r.OK, r.Sampled)
		}
	}
	if err != nil || !sum.OK || len(sum.Results) != clients {
		t.Fatalf("client script: %v; ok=%v, %d results", err, sum.OK, len(sum.Results))
	}
}
