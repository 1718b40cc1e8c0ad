package front

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Faults of compat.go's rules, found by attacking them.

// A request without an id is dropped on every transport, and a dropped
// request is no request: it leaves no audit line and no Observer record,
// on a legacy session's /messages as on a Streamable HTTP POST. (A legacy
// POST whose every message was dropped used to log one line with no method
// and outcome "ok", and the Observer counted it as a request answered.)
func TestDroppedRequestsLeaveNoAuditLine(t *testing.T) {
	var buf testkit.SyncBuffer
	au := audit.New(&buf, false)
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
	if got := testkit.Receive(t, l.data, "the ping's reply"); got != `{"jsonrpc":"2.0","id":"after","result":{}}` {
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

// A MCP-Protocol-Version header of tens of thousands of lines (what fits in
// net/http's megabyte of headers) costs a request no more than a few: the
// one version repeated is accepted and logged with the header clipped, and
// different values are refused with it clipped, without joining every line
// first. (The lines were joined one string concatenation at a time: 40,000
// of them took 18 s of CPU per request, and 20,000 allocated 5 GB.)
func TestManyVersionHeaderLinesCostLittle(t *testing.T) {
	h, _ := testServer(t, newFakeBackend(), Config{})
	const lines = 20000
	for _, tc := range []struct {
		what   string
		other  string // the last line's value
		status int
	}{
		{"one version repeated", "2025-06-18", http.StatusNotFound}, // accepted; the session is unknown
		{"different values", "2025-11-25", http.StatusBadRequest},
	} {
		r := httptest.NewRequest(http.MethodPost, mcpPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Session-Id", "no-such-session")
		vs := make([]string, lines)
		for i := range vs {
			vs[i] = "2025-06-18"
		}
		vs[lines-1] = tc.other
		r.Header["Mcp-Protocol-Version"] = vs
		w := httptest.NewRecorder()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h.ServeHTTP(w, r)
		runtime.ReadMemStats(&after)
		if w.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.what, w.Code, w.Body, tc.status)
		}
		// Joined whole the header is 240 kB, and joined a line at a time
		// it allocated 5 GB: a request needs a few kilobytes.
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: %d lines of the header allocated %d bytes", tc.what, lines, n)
		}
		if len(w.Body.String()) > 512 {
			t.Errorf("%s: a refusal of %d bytes: %.200s", tc.what, w.Body.Len(), w.Body)
		}
	}
	if n := h.CompatCounts().VersionHeaderMismatch[MismatchRepeated]; n != 1 {
		t.Errorf("repeated counted %d, want 1", n)
	}
}

// The version-header leniency, attacked (it held): a request that mixes
// eras on another principal's session (a 2026-07-28 body under either
// header, the newest version in the header of an older session, the same
// value repeated) stays unknown to it, on every method; only its own
// principal is served there.
func TestMixedErasKeepSessionOwnership(t *testing.T) {
	_, srv, backends := authServer(t, newFakeAuth(), Config{})
	alice, bob := []string{"Authorization", "Bearer alice"}, []string{"Authorization", "Bearer bob"}
	resp, body := do(t, srv, http.MethodPost, mcpPath, initBody, alice...)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("alice's initialize: %d %s", resp.StatusCode, body)
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	modern := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta + `}}`
	plain := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	for _, tc := range []struct {
		method, body string
		hdr          []string
	}{
		{http.MethodPost, modern, []string{"Mcp-Protocol-Version", "2025-11-25"}},
		{http.MethodPost, modern, []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo"}},
		{http.MethodPost, plain, []string{"Mcp-Protocol-Version", "2026-07-28"}},
		{http.MethodPost, plain, []string{"Mcp-Protocol-Version", "2025-06-18, 2025-06-18"}},
		{http.MethodGet, "", []string{"Mcp-Protocol-Version", "2026-07-28", "Accept", "text/event-stream"}},
		{http.MethodDelete, "", []string{"Mcp-Protocol-Version", "2026-07-28"}},
	} {
		hdr := append(append(append([]string{}, bob...), "Mcp-Session-Id", sid), tc.hdr...)
		if resp, body := do(t, srv, tc.method, mcpPath, tc.body, hdr...); resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob's %s on alice's session with %q: %d %s, want 404", tc.method, tc.hdr, resp.StatusCode, body)
		}
	}
	hdr := append(append([]string{}, alice...), "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2026-07-28")
	if resp, body := do(t, srv, http.MethodPost, mcpPath, plain, hdr...); resp.StatusCode != http.StatusOK || body != `{"jsonrpc":"2.0","id":5,"result":{}}` {
		t.Errorf("alice's own call with the newest version in the header: %d %s", resp.StatusCode, body)
	}
	if n := backends[0].opens.Load(); n != 1 {
		t.Errorf("%d connections opened, want alice's one", n)
	}
}

// Requests without a usable id, attacked (it held): an id of null, an
// array or an object is refused with 400 -32600 (a request whose id cannot
// be answered is malformed, not a notification); a request method without
// an id, alone or in a batch, on a session or not, is dropped with 202;
// none of them reaches the server, and "Notifications/x" (not the
// notifications/ prefix) counts as a request.
func TestRequestsWithoutUsableIDNeverForwarded(t *testing.T) {
	fake := newFakeBackend()
	fake.version = protocol.Version20250326 // batches allowed
	b := &recordingBackend{fakeBackend: fake}
	h, srv := routedServer(t, Config{Backends: map[string]conn.Backend{"x": b}})
	sid := initSession(t, srv)
	session := []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", protocol.Version20250326}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":[],"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"echo"}}`,
		`[{"jsonrpc":"2.0","id":null,"method":"tools/call"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]`,
	} {
		resp, out := do(t, srv, http.MethodPost, mcpPath, body, session...)
		if id, _ := rpcError(t, out); resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, `"code":-32600`) || id != "null" {
			t.Errorf("POST %s: %d %s, want 400 -32600 with id null", body, resp.StatusCode, out)
		}
	}
	for _, tc := range []struct {
		body string
		hdr  []string
	}{
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`, session},
		{`{"jsonrpc":"2.0","method":"Notifications/x"}`, session},
		{`{"jsonrpc":"2.0","method":""}`, session},
		{`[{"jsonrpc":"2.0","method":"tools/call"},{"jsonrpc":"2.0","method":"ping"}]`, session},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`, []string{"Mcp-Protocol-Version", "2025-11-25"}},
		// The control: a notification goes through.
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, session},
	} {
		if resp, out := do(t, srv, http.MethodPost, mcpPath, tc.body, tc.hdr...); resp.StatusCode != http.StatusAccepted {
			t.Errorf("POST %s: %d %s, want 202", tc.body, resp.StatusCode, out)
		}
	}
	if got := b.methods(); strings.Join(got, ",") != "initialize,notifications/cancelled" {
		t.Errorf("the server got %q, want the initialize and the notification only", got)
	}
	n := h.CompatCounts().RequestsWithoutID
	if n[TransportStreamable] != 4 || n[TransportBatch] != 2 {
		t.Errorf("dropped counted %v, want 4 streamable and 2 in a batch", n)
	}
}

// recordingBackend is a fakeBackend whose connections record the method
// of every message they are handed, notifications included.
type recordingBackend struct {
	*fakeBackend
	mu  sync.Mutex
	got []string
}

func (b *recordingBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	c, err := b.fakeBackend.Open(ctx, general)
	if err != nil {
		return nil, err
	}
	return recordingConn{c, b}, nil
}

func (b *recordingBackend) methods() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

type recordingConn struct {
	conn.Conn
	b *recordingBackend
}

func (c recordingConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	c.b.mu.Lock()
	c.b.got = append(c.b.got, msg.MethodName())
	c.b.mu.Unlock()
	c.Conn.Handle(ctx, msg, out)
}
