package front

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// keyAuth is fakeAuth with one more API key, "carol-key", valid but not
// for this target: a 403 that knows whom it refuses, as auth.Gate's is.
type keyAuth struct{ *fakeAuth }

func (a keyAuth) Authenticate(r *http.Request, t auth.Target) auth.Decision {
	if r.Header.Get("Authorization") == "Bearer carol-key" {
		return auth.Decision{Status: http.StatusForbidden, Reason: `API key "carol" may not use server "x"`,
			Refused: &auth.Principal{Name: "carol", Kind: "key"}}
	}
	return a.fakeAuth.Authenticate(r, t)
}

// findLine returns the one line with outcome and status.
func findLine(t *testing.T, lines []auditEntry, outcome string, status int) auditEntry {
	t.Helper()
	var found []auditEntry
	for _, l := range lines {
		if l.Outcome == outcome && l.Status == status {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d lines with outcome %q and status %d, want 1: %+v", len(found), outcome, status, lines)
	}
	return found[0]
}

// Refusals are audited: by authentication (401, 403: no method, the HTTP
// request instead, the refused key when known) and by the limits (429
// rate_limited, 503 overloaded, with the request's method and id).
func TestAuditRefusals(t *testing.T) {
	var buf testkit.SyncBuffer
	au := audit.New(&buf, false)
	clock := newTestClock()
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Auth: keyAuth{newFakeAuth()}, Audit: au,
		Limits: &limits.Config{RequestsPerSecond: 0.5, MaxInFlightTotal: 1, Now: clock.Now}})

	noBody := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tc := range []struct {
		method, path, body, token string
		status                    int
	}{
		{http.MethodPost, mcpPath, noBody, "", 401},
		{http.MethodGet, "/servers/x/sse", "", "nobody-i-know", 401},
		{http.MethodPost, mcpPath, noBody, "reader", 403},
		{http.MethodPost, "/servers/x/messages?sessionId=abc", noBody, "carol-key", 403},
	} {
		var hdr []string
		if tc.token != "" {
			hdr = []string{"Authorization", "Bearer " + tc.token}
		}
		if tc.method == http.MethodGet {
			hdr = append(hdr, "Accept", "text/event-stream")
		} else {
			hdr = append(hdr, "Content-Type", "application/json")
		}
		if resp, body := do(t, srv, tc.method, tc.path, tc.body, hdr...); resp.StatusCode != tc.status {
			t.Fatalf("%s %s as %q: %d %s, want %d", tc.method, tc.path, tc.token, resp.StatusCode, body, tc.status)
		}
	}

	alice := []string{"Authorization", "Bearer alice"}
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, alice...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	alice = append(alice, "Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version", "2025-06-18")
	conn := testkit.Receive(t, b.conns, "the session's conn")
	// alice's token is spent: 429.
	if resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"r","method":"tools/list"}`, alice...); resp.StatusCode != 429 {
		t.Fatalf("over the rate: %d %s", resp.StatusCode, body)
	}
	// alice holds the only slot of the global cap: bob gets 503.
	clock.advance(2 * time.Second)
	held := make(chan int, 1)
	go func() {
		resp, _ := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"h","method":"hold"}`, alice...)
		held <- resp.StatusCode
	}()
	testkit.Receive(t, conn.held, "the held request")
	if resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"o","method":"initialize","params":{}}`, "Authorization", "Bearer bob"); resp.StatusCode != 503 {
		t.Fatalf("over the global cap: %d %s", resp.StatusCode, body)
	}
	conn.release()
	if status := testkit.Receive(t, held, "the held reply"); status != http.StatusOK {
		t.Fatalf("held request: %d", status)
	}
	au.Close()
	lines := parseAudit(t, buf.String())

	// One line per refusal by authentication, in the order they came.
	want := []struct {
		status             int
		outcome, principal string
		http               string
		bytesIn            int
	}{
		{401, "unauthenticated", "", "POST /servers/x/mcp", len(noBody)},
		{401, "unauthenticated", "", "GET /servers/x/sse", 0},
		{403, "forbidden", "", "POST /servers/x/mcp", len(noBody)},
		{403, "forbidden", "key:carol", "POST /servers/x/messages", len(noBody)},
	}
	for i, w := range want {
		l := lines[i]
		if l.Status != w.status || l.Outcome != w.outcome || l.Principal != w.principal || l.HTTP != w.http || l.BytesIn != w.bytesIn ||
			l.Method != "" || l.ID != nil || l.Target != "x" || l.Kind != "server" || l.DurationMs == nil {
			t.Errorf("line %d: %+v, want %+v", i, l, w)
		}
	}
	if l := findLine(t, lines, "rate_limited", 429); l.Method != "tools/list" || string(l.ID) != `"r"` || l.Principal != "token:alice" || l.Code != -32000 {
		t.Errorf("rate_limited line: %+v", l)
	}
	// Refused before the principal's limits: bob's line still names him.
	if l := findLine(t, lines, "overloaded", 503); l.Method != "initialize" || string(l.ID) != `"o"` || l.Principal != "token:bob" || l.Code != -32000 {
		t.Errorf("overloaded line: %+v", l)
	}
}

// Legacy /messages requests get one line each, written when the reply is
// on the session's stream and timed until then; refusals by a limit are
// rate_limited; a POST refused before its messages are read gets one
// line without method, as on /mcp.
func TestAuditLegacyLines(t *testing.T) {
	var buf testkit.SyncBuffer
	clock := newTestClock()
	au := audit.NewWith(&buf, audit.Options{Arguments: true, Now: clock.Now})
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Auth: newFakeAuth(), Audit: au, Limits: &limits.Config{ToolsPerSecond: 1, Now: clock.Now}})
	c := openLegacy(t, srv, "Authorization", "Bearer alice-key")
	conn := testkit.Receive(t, b.conns, "the session's conn")

	c.accepted(`{"jsonrpc":"2.0","id":"h","method":"hold"}`)
	testkit.Receive(t, conn.held, "the held request")
	clock.advance(3 * time.Second)
	call := `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"missing"}`,
		strings.Replace(call, "%s", "3", 1),
		strings.Replace(call, "%s", "4", 1), // refused: the tool's rate
	} {
		c.accepted(body)
		c.next()
	}
	if resp, body := c.post(`{`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed: %d %s", resp.StatusCode, body)
	}
	clock.advance(2 * time.Second)
	conn.release()
	if r := c.next(); string(r.ID) != `"h"` {
		t.Fatalf("held reply: %s", r.ID)
	}
	au.Close()
	lines := parseAudit(t, buf.String())
	want := []struct {
		method, id, outcome string
		code, status        int
		ms                  float64
	}{
		{"tools/list", "1", "ok", 0, 202, 0},
		{"missing", "2", "error", -32601, 202, 0},
		{"tools/call", "3", "ok", 0, 202, 0},
		{"tools/call", "4", "rate_limited", -32000, 202, 0},
		{"", "", "error", -32700, 400, 0},
		{"hold", `"h"`, "ok", 0, 202, 5000}, // accepted at 0, its reply 5 s later
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		l := lines[i]
		if l.Method != w.method || string(l.ID) != w.id || l.Outcome != w.outcome || l.Code != w.code || l.Status != w.status ||
			l.DurationMs == nil || *l.DurationMs != w.ms || l.Principal != "key:alice" || l.Target != "x" || l.BytesOut <= 0 {
			t.Errorf("line %d: %+v (duration %v), want %+v", i, l, l.DurationMs, w)
		}
	}
	if l := lines[2]; l.Name != "echo" || string(l.Arguments) != `{"n":1}` || l.BytesIn != len(strings.Replace(call, "%s", "3", 1)) {
		t.Errorf("call line: name %q arguments %s bytesIn %d", l.Name, l.Arguments, l.BytesIn)
	}
}
