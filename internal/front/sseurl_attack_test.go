package front

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestSSEURLStreamableAdmitted: Streamable HTTP on an /sse URL (a POST, a
// DELETE, a GET carrying Mcp-Session-Id), routed by path, as the default
// endpoint and by host, is refused without credentials as on the /mcp URL,
// its 401 naming the /sse URL's document, and opens nothing.
func TestSSEURLStreamableAdmitted(t *testing.T) {
	a := newFakeAuth()
	h, srv, backends := authServer(t, a, Config{})
	targets := []struct{ path, host, doc string }{
		{"/servers/x/sse", "", srv.URL + wellKnownPRM + "/servers/x/sse"},
		{"/servers/x/sse/", "", srv.URL + wellKnownPRM + "/servers/x/sse"},
		{"/endpoints/team/sse", "", srv.URL + wellKnownPRM + "/endpoints/team/sse"},
		{"/sse", "", srv.URL + wellKnownPRM + "/sse"},
		{"/sse", "x.mcp.example.com", "http://x.mcp.example.com" + wellKnownPRM + "/sse"},
	}
	requests := []struct {
		method, body string
		hdr          []string
	}{
		{http.MethodPost, initBody, nil},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []string{"Mcp-Session-Id", "nope"}},
		{http.MethodPost, modernBody("1", "tools/list", ""), []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}},
		{http.MethodDelete, "", []string{"Mcp-Session-Id", "nope"}},
		{http.MethodGet, "", []string{"Accept", "text/event-stream", "Mcp-Session-Id", "nope"}},
	}
	for _, tg := range targets {
		for _, rq := range requests {
			for _, tok := range []string{"", "garbage"} {
				hdr := append([]string(nil), rq.hdr...)
				if tg.host != "" {
					hdr = append(hdr, "Host", tg.host)
				}
				if tok != "" {
					hdr = append(hdr, "Authorization", "Bearer "+tok)
				}
				resp, body := doHost(t, srv, rq.method, tg.path, rq.body, hdr...)
				where := rq.method + " " + tg.path + " " + tg.host + " " + strings.Join(rq.hdr, " ")
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s: %d %s, want 401", where, resp.StatusCode, body)
					continue
				}
				if ch := resp.Header.Get("WWW-Authenticate"); !strings.Contains(ch, `resource_metadata="`+tg.doc+`"`) {
					t.Errorf("%s: challenge %q, want %s", where, ch, tg.doc)
				}
			}
		}
	}
	// Origin first, before the credentials are asked for.
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodOptions} {
		resp, _ := doHost(t, srv, m, "/servers/x/sse", initBody, "Origin", "https://evil.example", "Mcp-Session-Id", "nope", "Authorization", "Bearer alice")
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("%s /servers/x/sse from a foreign origin: %d %q, want 403 without a challenge", m, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	for i, b := range backends {
		if n := b.opens.Load(); n != 0 {
			t.Errorf("backend %d opened %d sessions for refused requests", i, n)
		}
	}
	if n := h.Sessions(); n != 0 {
		t.Errorf("%d sessions after refused requests", n)
	}
}

// TestSSEURLSessionsKeepTheirTarget: a session opened by a POST on a
// target's /sse URL belongs to that target and principal, whichever of
// the target's URLs it is used on: another target's /sse or /mcp URL, or
// another principal, does not find it; a legacy session's id given as
// Mcp-Session-Id on an /sse URL neither finds that session nor opens one.
func TestSSEURLSessionsKeepTheirTarget(t *testing.T) {
	a := newFakeAuth()
	h, srv, _ := authServer(t, a, Config{})
	alice := []string{"Authorization", "Bearer alice"}
	resp, body := doHost(t, srv, http.MethodPost, "/servers/x/sse", initBody, alice...)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize on /sse: %d %s", resp.StatusCode, body)
	}
	list := `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`
	use := func(path string, hdr ...string) int {
		h := append([]string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"}, hdr...)
		resp, _ := doHost(t, srv, http.MethodPost, path, list, h...)
		return resp.StatusCode
	}
	if c := use("/servers/x/mcp", alice...); c != http.StatusOK {
		t.Errorf("the session on its target's /mcp URL: %d", c)
	}
	for _, p := range []string{"/endpoints/team/sse", "/sse", "/endpoints/all/sse", "/endpoints/team/mcp"} {
		if c := use(p, alice...); c != http.StatusNotFound {
			t.Errorf("the session of server x on %s: %d, want 404", p, c)
		}
	}
	if c := use("/sse", "Authorization", "Bearer alice", "Host", "team.mcp.example.com"); c != http.StatusNotFound {
		t.Errorf("the session of server x on team's host: %d, want 404", c)
	}
	if c := use("/servers/x/sse", "Authorization", "Bearer bob"); c != http.StatusNotFound {
		t.Errorf("alice's session used by bob on /sse: %d, want 404", c)
	}

	// A legacy session of alice on x.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/servers/x/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer alice")
	get, err := srv.Client().Do(req)
	if err != nil || get.StatusCode != http.StatusOK {
		t.Fatalf("legacy GET: %v %+v", err, get)
	}
	defer get.Body.Close()
	ev, err := sse.NewReader(get.Body, 0).Next()
	if err != nil || ev.Event != "endpoint" {
		t.Fatalf("legacy endpoint event: %v %+v", err, ev)
	}
	_, legacyID, _ := strings.Cut(string(ev.Data), "sessionId=")
	before := h.Sessions()
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		hdr := []string{"Mcp-Session-Id", legacyID, "Mcp-Protocol-Version", "2025-06-18", "Authorization", "Bearer alice"}
		if m == http.MethodGet {
			hdr = append(hdr, "Accept", "text/event-stream")
		}
		resp, body := doHost(t, srv, m, "/servers/x/sse", list, hdr...)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s /servers/x/sse with a legacy session's id as Mcp-Session-Id: %d %s, want 404", m, resp.StatusCode, body)
		}
	}
	if h.Sessions() != before || h.store.Lookup(legacyID) == nil {
		t.Errorf("sessions %d, want %d, the legacy one kept", h.Sessions(), before)
	}
}

// TestSSEURLPostAuditedAndLimited: a POST on an /sse URL gets the /mcp
// URL's audit line and per-principal limits.
func TestSSEURLPostAuditedAndLimited(t *testing.T) {
	var buf testkit.SyncBuffer
	au := audit.New(&buf, false)
	clock := newTestClock()
	_, srv := testServer(t, newFakeBackend(), Config{Auth: newFakeAuth(), Audit: au, Limits: &limits.Config{ToolsPerSecond: 1, Now: clock.Now}})
	who := []string{"Authorization", "Bearer alice"}
	resp, body := do(t, srv, http.MethodPost, "/servers/x/sse", initBody, who...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	hdr := append(who, "Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version", "2025-06-18")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	if resp, body := do(t, srv, http.MethodPost, "/servers/x/sse/", call, hdr...); resp.StatusCode != http.StatusOK {
		t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, srv, http.MethodPost, "/servers/x/sse", call, hdr...); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second call within the second: %d %s, want 429", resp.StatusCode, body)
	}
	au.Close()
	lines := parseAudit(t, buf.String())
	var got []string
	for _, l := range lines {
		got = append(got, l.Method+" "+l.Outcome+" "+l.Principal+" "+l.Kind+" "+l.Target)
	}
	want := []string{
		"initialize ok token:alice server x",
		"tools/call ok token:alice server x",
		"tools/call rate_limited token:alice server x",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
