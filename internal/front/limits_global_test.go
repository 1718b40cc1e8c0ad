package front

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// checkOverloaded checks a 503 with Retry-After and a JSON-RPC error of
// id saying the gateway is overloaded.
func checkOverloaded(t *testing.T, resp *http.Response, body, id string) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got == "" {
		t.Errorf("no Retry-After")
	}
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if string(m.ID) != id || m.Error.Code == 0 || !strings.Contains(m.Error.Message, "overloaded") {
		t.Errorf("body %s: want id %s and an error saying the gateway is overloaded", body, id)
	}
}

// The global cap counts the POSTs of every principal: with two held by
// two principals, any further request is refused with 503 (a session
// request, a batch with id null, a stateless one), while a POST of
// notifications only passes; once the held ones are answered, requests
// are admitted again.
func TestGlobalCapAcrossPrincipals(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Auth: newFakeAuth(), Limits: &limits.Config{MaxInFlightTotal: 2}})
	type user struct {
		hdr  []string
		conn *fakeConn
		held <-chan string
	}
	users := []*user{{hdr: []string{"Authorization", "Bearer alice"}}, {hdr: []string{"Authorization", "Bearer bob"}}}
	for _, u := range users {
		resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, u.hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		u.hdr = append(u.hdr, "Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version", "2025-06-18")
		u.conn = testkit.Receive(t, b.conns, "the session's conn")
	}
	for _, u := range users {
		out := make(chan string, 1)
		go func() {
			resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"held","method":"hold"}`, u.hdr...)
			out <- resp.Status + " " + body
		}()
		u.held = out
		testkit.Receive(t, u.conn.held, "the held request")
	}

	alice := users[0].hdr
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":77,"method":"tools/list"}`, alice...)
	checkOverloaded(t, resp, body, "77")
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1 (no request has ended yet)", got)
	}
	resp, body = do(t, srv, http.MethodPost, mcpPath, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, alice...)
	checkOverloaded(t, resp, body, "null")
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"s1","method":"tools/list","params":{`+meta+`}}`,
		"Authorization", "Bearer bob", "MCP-Protocol-Version", "2026-07-28")
	checkOverloaded(t, resp, body, `"s1"`)
	if resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, alice...); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a notification at the cap: %d %s", resp.StatusCode, body)
	}

	for _, u := range users {
		u.conn.release()
		if got := testkit.Receive(t, u.held, "the held reply"); !strings.HasPrefix(got, "200") || !strings.Contains(got, "released") {
			t.Fatalf("held request: %s", got)
		}
	}
	// The handlers release their slots as they return, just after the
	// bodies arrive: wait for that, not for a time.
	testkit.WaitFor(t, "the slots to be released", func() bool {
		resp, _ := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":78,"method":"tools/list"}`, alice...)
		return resp.StatusCode == http.StatusOK
	})
}
