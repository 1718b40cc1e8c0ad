package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Per-tool policy e2e: the reference servers behind API keys, the official TypeScript SDK client
// as each principal, over Streamable HTTP and legacy SSE, at a server's URL and through the
// default endpoint.

const policyClientScript = "policy_client.mjs"

// policySummary is what policy_client.mjs prints.
type policySummary struct {
	Tools []string `json:"tools"`
	Calls map[string]struct {
		Text  string `json:"text"`
		Error *struct {
			Code    *int   `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"calls"`
	Fatal string `json:"fatal"`
}

func runPolicyClient(t *testing.T, script, url string, key apiKey, transport string, calls ...string) policySummary {
	t.Helper()
	args := []string{script, "--url", url, "--transport", transport, "--header", "Authorization: " + key.bearer()}
	for _, c := range calls {
		args = append(args, "--call", c)
	}
	out, err := runNode(t, peersDir, 60*time.Second, args...)
	var sum policySummary
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil || err != nil || sum.Fatal != "" {
		t.Fatalf("policy client (%v): %v\n%s", err, jerr, out)
	}
	return sum
}

// TestPolicyTSClient: server-everything under a policy (ci may use only echo; other may use all
// but echo) and server-memory under none, merged by the default endpoint whose own policy hides
// memory's delete_entities from ci. Each principal's TypeScript SDK client sees only its tools,
// in either transport, and a call of a hidden tool is answered with -32602 naming it, while the
// allowed ones work.
func TestPolicyTSClient(t *testing.T) {
	requirePeers(t, node22, serverEverything, serverMemory)
	script := installScript(t, policyClientScript)
	base := startGateway(t, map[string]any{
		"mcpServers": map[string]any{
			"everything": map[string]any{"command": node22, "args": []string{serverEverything, "stdio"}, "policy": map[string]any{
				"rules": []any{
					map[string]any{"principals": []string{"ci"}, "tools": []string{"echo"}},
					map[string]any{"principals": []string{"other"}, "effect": "deny", "tools": []string{"echo"}},
					map[string]any{"principals": []string{"other"}},
				},
			}},
			"memory": map[string]any{"command": node22, "args": []string{serverMemory},
				"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}},
		},
		"gateway": map[string]any{
			"auth": apiKeyAuth(ciKey, otherKey),
			"endpoints": map[string]any{"all": map[string]any{"policy": map[string]any{"default": "allow", "rules": []any{
				map[string]any{"principals": []string{"ci"}, "effect": "deny", "tools": []string{"memory__delete_entities"}},
			}}}},
		},
	})
	denied := func(t *testing.T, sum policySummary, name string) {
		t.Helper()
		c, ok := sum.Calls[name]
		if !ok || c.Error == nil || !strings.Contains(c.Error.Message, "-32602") && (c.Error.Code == nil || *c.Error.Code != -32602) {
			t.Errorf("call of %s: %+v, want a -32602 error", name, c)
		}
	}
	for _, transport := range []string{"streamable", "sse"} {
		t.Run(transport, func(t *testing.T) {
			url := base + "/servers/everything/mcp"
			if transport == "sse" {
				url = base + "/servers/everything/sse"
			}
			ci := runPolicyClient(t, script, url, ciKey, transport, `echo={"message":"hi"}`, `get-sum={"a":1,"b":2}`)
			if !slices.Equal(ci.Tools, []string{"echo"}) {
				t.Errorf("ci's tools %v, want [echo]", ci.Tools)
			}
			if got := ci.Calls["echo"].Text; !strings.Contains(got, "hi") {
				t.Errorf("ci's echo: %q", got)
			}
			denied(t, ci, "get-sum")
			if c := ci.Calls["get-sum"]; c.Error != nil && !strings.Contains(c.Error.Message, `tool "get-sum" is not allowed for "ci"`) {
				t.Errorf("ci's get-sum refused with %q", c.Error.Message)
			}

			other := runPolicyClient(t, script, url, otherKey, transport, `echo={"message":"hi"}`, `get-sum={"a":1,"b":2}`)
			if slices.Contains(other.Tools, "echo") || !slices.Contains(other.Tools, "get-sum") {
				t.Errorf("other's tools %v: want get-sum and not echo", other.Tools)
			}
			denied(t, other, "echo")
			if got := other.Calls["get-sum"].Text; !strings.Contains(got, "3") {
				t.Errorf("other's get-sum: %q", got)
			}
		})
	}
	t.Run("endpoint", func(t *testing.T) {
		ci := runPolicyClient(t, script, base+"/mcp", ciKey, "streamable", `everything__get-sum={"a":1,"b":2}`, `memory__delete_entities={"entityNames":["x"]}`, `memory__read_graph={}`)
		for _, want := range []string{"everything__echo", "memory__create_entities", "memory__read_graph"} {
			if !slices.Contains(ci.Tools, want) {
				t.Errorf("ci's endpoint tools %v lack %s", ci.Tools, want)
			}
		}
		for _, hidden := range []string{"everything__get-sum", "memory__delete_entities"} {
			if slices.Contains(ci.Tools, hidden) {
				t.Errorf("ci's endpoint tools %v have %s", ci.Tools, hidden)
			}
			denied(t, ci, hidden)
		}
		if c := ci.Calls["memory__read_graph"]; c.Error != nil {
			t.Errorf("ci's memory__read_graph: %+v", c.Error)
		}
	})
}
