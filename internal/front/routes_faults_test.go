package front

import (
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
)

// The slashed URLs, attacked (they held): a session is usable at its
// target's URLs with or without the slash and at no other target's; the
// Origin check and authentication hold on every slashed URL; a path with
// an escaped slash names no target.
func TestTrailingSlashKeepsTargetsApart(t *testing.T) {
	_, srv := routedServer(t, Config{
		Backends:      map[string]conn.Backend{"x": newFakeBackend(), "y": newFakeBackend()},
		Endpoints:     map[string]conn.Backend{"x": newFakeBackend(), "all": newFakeBackend()},
		OriginAllowed: func(o string) bool { return o == "" },
	})
	sid := initAt(t, srv, "/servers/x/mcp/", "")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for path, want := range map[string]int{
		"/servers/x/mcp": http.StatusOK, "/servers/x/mcp/": http.StatusOK,
		"/servers/y/mcp/": http.StatusNotFound, "/endpoints/x/mcp/": http.StatusNotFound,
		"/mcp/": http.StatusNotFound, "/mcp": http.StatusNotFound,
		"/servers/x/mcp%2F": http.StatusNotFound, "/servers/x%2Fmcp/mcp": http.StatusNotFound,
	} {
		if resp, body := do(t, srv, http.MethodPost, path, ping, "Mcp-Session-Id", sid); resp.StatusCode != want {
			t.Errorf("POST %s with a session of /servers/x/mcp/: %d %s, want %d", path, resp.StatusCode, body, want)
		}
	}
	for _, path := range []string{"/servers/x/mcp/", "/endpoints/x/mcp/", "/mcp/", "/servers/x/sse/", "/servers/x/messages/"} {
		if resp, body := do(t, srv, http.MethodPost, path, ping, "Mcp-Session-Id", sid, "Origin", "https://evil.example"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s from a foreign Origin: %d %s, want 403", path, resp.StatusCode, body)
		}
	}

	_, asrv, _ := authServer(t, newFakeAuth(), Config{})
	for _, path := range []string{"/servers/x/mcp/", "/endpoints/all/mcp/", "/mcp/", "/sse/", "/messages/"} {
		if resp, body := do(t, asrv, http.MethodPost, path, initBody); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without credentials: %d %s, want 401", path, resp.StatusCode, body)
		}
	}
}
