package front

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestSetTargets: targets added, replaced and removed by SetTargets are
// what the next requests see (the default endpoint's bare /mcp included);
// a session on a target SetTargets kept goes on.
func TestSetTargets(t *testing.T) {
	x, y, all := newFakeBackend(), newFakeBackend(), newFakeBackend()
	h, srv := testServer(t, x, Config{})
	sid := initSession(t, srv)
	const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`
	if resp, body := do(t, srv, http.MethodPost, "/servers/y/mcp", initBody); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("y before: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, srv, http.MethodPost, "/mcp", initBody); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "nothing at /mcp") {
		t.Fatalf("/mcp before: %d %s", resp.StatusCode, body)
	}

	h.SetTargets(Targets{Backends: map[string]conn.Backend{"x": x, "y": y}, Endpoints: map[string]conn.Backend{DefaultEndpoint: all}})
	for _, path := range []string{"/servers/y/mcp", "/mcp"} {
		if resp, body := do(t, srv, http.MethodPost, path, initBody); resp.StatusCode != http.StatusOK {
			t.Errorf("%s after: %d %s", path, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"); resp.StatusCode != http.StatusOK {
		t.Errorf("the session on x after: %d %s", resp.StatusCode, body)
	}

	h.SetTargets(Targets{Backends: map[string]conn.Backend{"x": x}})
	if resp, _ := do(t, srv, http.MethodPost, "/servers/y/mcp", initBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("y removed: %d", resp.StatusCode)
	}
}

// TestCloseTarget: CloseTarget ends only its target's sessions, answering
// their requests in flight with the reason; other targets' go on.
func TestCloseTarget(t *testing.T) {
	x, y := newFakeBackend(), newFakeBackend()
	x.closeWith = true
	h, srv := testServer(t, x, Config{})
	h.SetTargets(Targets{Backends: map[string]conn.Backend{"x": x, "y": y}})
	sid := initSession(t, srv)
	conn := <-x.conns
	resp, _ := do(t, srv, http.MethodPost, "/servers/y/mcp", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	other := resp.Header.Get("Mcp-Session-Id")
	held := postAsync(t, srv, sid, "2025-06-18", `{"jsonrpc":"2.0","id":7,"method":"hold"}`)
	testkit.Receive(t, conn.held, "the held request")
	if n := h.CloseTarget("x", "the server's config changed"); n != 1 {
		t.Fatalf("CloseTarget ended %d sessions, want 1", n)
	}
	if got := testkit.Receive(t, held, "the held request's answer"); !strings.Contains(got, "mcpgate: the server's config changed") {
		t.Errorf("held request: %s", got)
	}
	if resp, _ := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("closed session: %d, want 404", resp.StatusCode)
	}
	if resp, body := do(t, srv, http.MethodPost, "/servers/y/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		"Mcp-Session-Id", other, "Mcp-Protocol-Version", "2025-06-18"); resp.StatusCode != http.StatusOK {
		t.Errorf("y's session: %d %s", resp.StatusCode, body)
	}
}
