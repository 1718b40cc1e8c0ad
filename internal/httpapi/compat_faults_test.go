package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// Faults of compat.go's rules, found by attacking them.

// A request without an id is dropped on every transport, and a dropped
// request is no request: it leaves no audit line and no Observer record,
// on a legacy session's /messages as on a Streamable HTTP POST. (A legacy
// POST whose every message was dropped used to log one line with no method
// and outcome "ok", and the Observer counted it as a request answered.)
func TestDroppedRequestsLeaveNoAuditLine(t *testing.T) {
	var buf syncBuffer
	au := NewAuditor(&buf, false)
	rec := &recorder{}
	h, srv := testServer(t, newFakeBackend(), Config{Audit: au, Observer: rec})
	const idless = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{}}}`

	sid := initSession(t, srv)
	if resp, body := do(t, srv, http.MethodPost, mcpPath, idless, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("Streamable HTTP POST: %d %s", resp.StatusCode, body)
	}
	l := openLegacyAt(t, srv, "/servers/x/sse", "")
	if resp, body := do(t, srv, http.MethodPost, l.endpoint, idless); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("legacy POST: %d %s", resp.StatusCode, body)
	}
	// A request with an id after it: its line is the last.
	if resp, body := do(t, srv, http.MethodPost, l.endpoint, `{"jsonrpc":"2.0","id":"after","method":"ping"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("legacy ping: %d %s", resp.StatusCode, body)
	}
	if got := waitFor(t, l.data, "the ping's reply"); got != `{"jsonrpc":"2.0","id":"after","result":{}}` {
		t.Fatalf("legacy reply %s", got)
	}
	au.Close()

	lines := parseAudit(t, buf.String())
	var methods []string
	for _, e := range lines {
		methods = append(methods, e.Method)
	}
	if strings.Join(methods, ",") != "initialize,ping" {
		t.Errorf("audit lines of methods %q, want initialize and ping only:\n%s", methods, buf.String())
	}
	methods = methods[:0]
	for _, r := range rec.records() {
		methods = append(methods, r.Method)
	}
	if strings.Join(methods, ",") != "initialize,ping" {
		t.Errorf("Observer records of methods %q, want initialize and ping only", methods)
	}
	if n := h.CompatCounts().RequestsWithoutID; n[TransportStreamable] != 1 || n[TransportLegacySSE] != 1 {
		t.Errorf("dropped counted %v, want one streamable and one legacy_sse", n)
	}
}
