package front

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Every URL is served with a trailing slash too, as the same target: a
// session opened at /mcp/ is used there (a call answered with its id) and
// on the URL without the slash; a legacy stream opened at /sse/ takes its
// messages at its endpoint URL and at /messages/. A path below one of them
// stays 404.
func TestTrailingSlashServed(t *testing.T) {
	server, endpoint, all := newFakeBackend(), newFakeBackend(), newFakeBackend()
	_, srv := routedServer(t, Config{
		Backends:  map[string]conn.Backend{"x": server},
		Endpoints: map[string]conn.Backend{"x": endpoint, "all": all},
	})
	for _, tc := range []struct {
		base    string // without the slash
		backend *fakeBackend
	}{
		{"/servers/x", server},
		{"/endpoints/x", endpoint},
		{"", all},
	} {
		t.Run("mcp"+tc.base, func(t *testing.T) {
			opens := tc.backend.opens.Load()
			sid := initAt(t, srv, tc.base+"/mcp/", "")
			if tc.backend.opens.Load() != opens+1 {
				t.Fatal("the session was not opened on its own backend")
			}
			for _, path := range []string{tc.base + "/mcp/", tc.base + "/mcp"} {
				resp, body := do(t, srv, http.MethodPost, path, `{"jsonrpc":"2.0","id":"call-\u00e9-1","method":"ping"}`,
					"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18")
				if resp.StatusCode != http.StatusOK || body != `{"jsonrpc":"2.0","id":"call-\u00e9-1","result":{}}` {
					t.Errorf("POST %s: %d %s", path, resp.StatusCode, body)
				}
			}
			if resp, body := do(t, srv, http.MethodDelete, tc.base+"/mcp/", "", "Mcp-Session-Id", sid); resp.StatusCode != http.StatusNoContent {
				t.Errorf("DELETE %s/mcp/: %d %s", tc.base, resp.StatusCode, body)
			}
		})
		t.Run("sse"+tc.base, func(t *testing.T) {
			l := openLegacyAt(t, srv, tc.base+"/sse/", "")
			path, query, _ := strings.Cut(l.endpoint, "?")
			if path != tc.base+"/messages" {
				t.Fatalf("endpoint event %q, want %s/messages?sessionId=...", l.endpoint, tc.base)
			}
			resp, body := do(t, srv, http.MethodPost, tc.base+"/messages/?"+query, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST %s/messages/: %d %s", tc.base, resp.StatusCode, body)
			}
			if got := testkit.Receive(t, l.data, "the reply"); got != `{"jsonrpc":"2.0","id":6,"result":{}}` {
				t.Errorf("reply %s", got)
			}
		})
	}
	for _, path := range []string{"/servers/x/mcp/more", "/endpoints/x/sse/x", "/mcp/x"} {
		if resp, body := do(t, srv, http.MethodPost, path, initBody); resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
}

// A subdomain-routed target is served at /mcp/ too, and a protected
// target's metadata document at its slashed URL's well-known path, naming
// the target's resource as it is without the slash.
func TestTrailingSlashHostsAndMetadata(t *testing.T) {
	server := newFakeBackend()
	_, srv := routedServer(t, Config{Backends: map[string]conn.Backend{"x": server}, HostDomain: "mcp.example.com"})
	sid := initAt(t, srv, "/mcp/", "x.mcp.example.com")
	resp, body := doHost(t, srv, http.MethodPost, "/mcp/", `{"jsonrpc":"2.0","id":12345678901234567890123,"method":"ping"}`,
		"Host", "x.mcp.example.com", "Mcp-Session-Id", sid)
	if resp.StatusCode != http.StatusOK || body != `{"jsonrpc":"2.0","id":12345678901234567890123,"result":{}}` {
		t.Errorf("host-routed POST /mcp/: %d %s", resp.StatusCode, body)
	}

	_, asrv, _ := authServer(t, newFakeAuth(), Config{})
	for path, resource := range map[string]string{
		"/servers/x/mcp/":     asrv.URL + "/servers/x/mcp",
		"/endpoints/all/mcp/": asrv.URL + "/endpoints/all/mcp",
		"/mcp/":               asrv.URL + "/mcp",
	} {
		resp, body := do(t, asrv, http.MethodGet, wellKnownPRM+path, "")
		var doc struct{ Resource string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc.Resource != resource {
			t.Errorf("GET %s%s: %d %s, want resource %s", wellKnownPRM, path, resp.StatusCode, body, resource)
		}
	}
}

// Config.BareServer serves its server at the bare paths while there is no
// default endpoint, and only then: the default endpoint keeps them.
func TestBareServer(t *testing.T) {
	server, all := newFakeBackend(), newFakeBackend()
	_, srv := routedServer(t, Config{Backends: map[string]conn.Backend{"x": server}, BareServer: "x"})
	sid := initAt(t, srv, "/mcp/", "")
	if server.opens.Load() != 1 {
		t.Fatal("the session at /mcp was not opened on the bare server")
	}
	if resp, body := do(t, srv, http.MethodPost, "/servers/x/mcp", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, "Mcp-Session-Id", sid); resp.StatusCode != http.StatusOK || body != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Errorf("the /mcp session at /servers/x/mcp: %d %s", resp.StatusCode, body)
	}
	if l := openLegacyAt(t, srv, "/sse", ""); !strings.HasPrefix(l.endpoint, "/messages?sessionId=") {
		t.Errorf("legacy endpoint at /sse: %q", l.endpoint)
	}

	_, srv = routedServer(t, Config{Backends: map[string]conn.Backend{"x": server}, Endpoints: map[string]conn.Backend{"all": all}, BareServer: "x"})
	initAt(t, srv, "/mcp", "")
	if all.opens.Load() != 1 || server.opens.Load() != 2 {
		t.Errorf("with a default endpoint /mcp opened %d on it and %d more on the server", all.opens.Load(), server.opens.Load()-2)
	}
	_, srv = routedServer(t, Config{Backends: map[string]conn.Backend{"x": server}, BareServer: "y"})
	if resp, body := do(t, srv, http.MethodPost, "/mcp", initBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a bare server that is not configured: %d %s", resp.StatusCode, body)
	}
}

// TestSSEURLServesStreamableHTTP: a Streamable HTTP client given a
// target's /sse URL (Claude Code's --transport http with the URL a user
// had) initializes, calls, opens its GET stream and ends its session
// there, as on the /mcp URL; a GET without a session id still opens a
// legacy session, which names its /messages URL.
func TestSSEURLServesStreamableHTTP(t *testing.T) {
	b := newFakeBackend()
	h, srv := testServer(t, b, Config{})
	for _, path := range []string{"/servers/x/sse", "/servers/x/sse/"} {
		resp, body := do(t, srv, http.MethodPost, path, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" || !strings.Contains(body, `"protocolVersion"`) {
			t.Fatalf("POST initialize to %s: %d %q %s", path, resp.StatusCode, sid, body)
		}
		v := "2025-06-18"
		resp, body = do(t, srv, http.MethodPost, path, `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":"a"`) {
			t.Fatalf("POST tools/list to %s: %d %s", path, resp.StatusCode, body)
		}
		// The session's GET stream opens (its headers come at once).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", v)
		get, err := srv.Client().Do(req)
		if err != nil || get.StatusCode != http.StatusOK || get.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("GET stream on %s: %v %+v", path, err, get)
		}
		cancel()
		get.Body.Close()
		resp, body = do(t, srv, http.MethodDelete, path, "", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("DELETE on %s: %d %s", path, resp.StatusCode, body)
		}
		if h.store.Lookup(sid) != nil {
			t.Fatalf("session %s lives after its DELETE on %s", sid, path)
		}
	}
	// A GET without a session id is the legacy transport's: its first event
	// names the /messages URL.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/servers/x/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("legacy GET: %v %+v", err, resp)
	}
	defer resp.Body.Close()
	ev, err := sse.NewReader(resp.Body, 0).Next()
	if err != nil || ev.Event != "endpoint" || !strings.HasPrefix(string(ev.Data), "/servers/x/messages?sessionId=") {
		t.Fatalf("legacy GET's first event: %v %q %q", err, ev.Event, ev.Data)
	}
}
