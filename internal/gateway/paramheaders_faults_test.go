package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A principal's Mcp-Param headers are checked against what its own lists
// show, never against another principal's: alice may use "where", bob's
// policy hides it. Once alice listed, bob's call of "where" got 400 and
// -32020 naming the tool's annotated argument ("missing Mcp-Param-Message
// header for arguments.message") on the old code, where the policy
// answers that the tool is not allowed: a tool hidden from him, and its
// schema, told by the gateway. At a server's URL (the front's policy) and
// at an endpoint's (the member's policy) alike. Alice's own calls stay
// checked.
func TestParamHeadersPerPrincipal(t *testing.T) {
	opts := testkit.FakeOptions{}
	opts.Catalog.HeaderTools = []string{"where"}
	cfg := newConfig(fakeServer("p", opts))
	cfg.Servers["p"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Principals: []string{"bob"}, Tools: []string{"where"}},
	}}
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"p"})
	cfg.Gateway.Auth = config.NewAuth()
	for _, name := range []string{"alice", "bob"} {
		sum := sha256.Sum256([]byte("key-of-" + name))
		cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Name: name, SHA256: hex.EncodeToString(sum[:])})
	}
	g := startGateway(t, cfg)

	post := func(path, who, method, name, params string, header map[string]string) (int, rpc) {
		t.Helper()
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		if params == "" {
			params = "{" + meta + "}"
		} else {
			params = strings.TrimSuffix(params, "}") + "," + meta + "}"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+path,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Authorization", "Bearer key-of-"+who)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := g.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			raw = []byte(strings.TrimPrefix(lines[len(lines)-1], "data: "))
		}
		return resp.StatusCode, decode(t, raw)
	}
	for _, at := range []struct{ path, tool string }{
		{"/servers/p/mcp", "where"},
		{"/endpoints/all/mcp", "p__where"},
	} {
		if status, list := post(at.path, "alice", "tools/list", "", "", nil); status != http.StatusOK || !strings.Contains(string(list.Result), `"`+at.tool+`"`) {
			t.Fatalf("%s: alice's tools/list: %d %s %+v", at.path, status, list.Result, list.Error)
		}
		args, _ := json.Marshal(map[string]any{"name": at.tool, "arguments": map[string]string{"message": "hi"}})
		for _, header := range []map[string]string{nil, {"Mcp-Param-Message": "ho"}} {
			status, m := post(at.path, "bob", "tools/call", at.tool, string(args), header)
			if m.Error == nil || m.Error.Code != -32602 || strings.Contains(m.Error.Message, "Mcp-Param") || strings.Contains(m.Error.Message, "Header mismatch") {
				t.Errorf("%s: bob's call of %s with %v: %d %+v, want the policy's -32602 and nothing of the tool's schema", at.path, at.tool, header, status, m.Error)
			}
		}
		if status, m := post(at.path, "alice", "tools/call", at.tool, string(args), map[string]string{"Mcp-Param-Message": "ho"}); status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32020 {
			t.Errorf("%s: alice's disagreeing header: %d %+v, want 400 and -32020", at.path, status, m.Error)
		}
	}
}
