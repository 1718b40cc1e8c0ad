package front

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (r *recorder) Request(rec audit.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func (r *recorder) records() []audit.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// TestObserverWithoutAudit: without an audit log the Observer still gets
// one record per request, with the audit log's outcomes; a request held
// by its server counts in InFlight until answered.
func TestObserverWithoutAudit(t *testing.T) {
	b := newFakeBackend()
	rec := &recorder{}
	h, srv := testServer(t, b, Config{Auth: newFakeAuth(), Observer: rec, Limits: &limits.Config{ToolsPerSecond: 0.001}})
	alice := []string{"Authorization", "Bearer alice"}
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, alice...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	hdr := append(alice, "Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version", "2025-06-18")
	conn := testkit.Receive(t, b.conns, "the session's conn")
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"missing"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, // 429
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,                                 // no record
	} {
		do(t, srv, http.MethodPost, mcpPath, body, hdr...)
	}
	do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":4,"method":"ping"}`) // 401

	if n := h.InFlight(); n != 0 {
		t.Errorf("InFlight = %d before the held request, want 0", n)
	}
	held := make(chan int, 1)
	go func() {
		resp, _ := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"h","method":"hold"}`, hdr...)
		held <- resp.StatusCode
	}()
	testkit.Receive(t, conn.held, "the held request")
	if n := h.InFlight(); n != 1 {
		t.Errorf("InFlight = %d with a request held, want 1", n)
	}
	conn.release()
	if st := testkit.Receive(t, held, "the held reply"); st != http.StatusOK {
		t.Errorf("held request: %d", st)
	}

	want := []struct {
		method, outcome string
		code, status    int
	}{
		{"initialize", audit.OutcomeOK, 0, 200},
		{"tools/call", audit.OutcomeOK, 0, 200},
		{"missing", audit.OutcomeError, protocol.CodeMethodNotFound, 200},
		{"tools/call", audit.OutcomeRateLimited, protocol.CodeServerError, 429},
		{"", audit.OutcomeUnauthenticated, protocol.CodeInvalidRequest, 401},
		{"hold", audit.OutcomeOK, 0, 200},
	}
	got := rec.records()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Method != w.method || g.Outcome != w.outcome || g.Code != w.code || g.Status != w.status || g.Target != "x" || g.Kind != "server" {
			t.Errorf("record %d = %+v, want %s %s %d %d", i, g, w.method, w.outcome, w.code, w.status)
		}
	}
	// No Name without an audit log: it would cost decoding the params.
	if g := got[1]; g.Principal != "token:alice" || g.Name != "" || g.BytesIn == 0 || g.BytesOut == 0 || g.Duration <= 0 {
		t.Errorf("call record = %+v", g)
	}
	if n := h.InFlight(); n != 0 {
		t.Errorf("InFlight = %d once answered, want 0", n)
	}
}

// TestObserverWithAudit: with both, the audit log keeps its lines and the
// Observer gets the same requests.
func TestObserverWithAudit(t *testing.T) {
	var buf testkit.SyncBuffer
	au := audit.New(&buf, false)
	rec := &recorder{}
	_, srv := testServer(t, newFakeBackend(), Config{Audit: au, Observer: rec})
	resp, _ := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	hdr := []string{"Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version", "2025-06-18"}
	do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`, hdr...)
	au.Close()
	lines := parseAudit(t, buf.String())
	recs := rec.records()
	if len(lines) != 2 || len(recs) != 2 || recs[1].Name != "p" {
		t.Fatalf("%d lines and %d records (%+v), want 2 of each", len(lines), len(recs), recs)
	}
	for i := range lines {
		if lines[i].Method != recs[i].Method || lines[i].Outcome != recs[i].Outcome || lines[i].BytesOut != recs[i].BytesOut || lines[i].Name != recs[i].Name {
			t.Errorf("line %+v, record %+v", lines[i], recs[i])
		}
	}
}

func TestIsDenial(t *testing.T) {
	for _, tt := range []struct {
		code int
		msg  string
		want bool
	}{
		{CodePolicyDenied, `mcpgate: tool "x" is not allowed for "alice" by the policy of server "s"`, true},
		{CodePolicyDenied, `mcpgate: tool "x" is not allowed by the policy of endpoint "all"`, true},
		{CodePolicyDenied, `unknown tool: x`, false},
		{CodePolicyDenied, `x is not allowed by the policy of mine`, false}, // a server's words
		{protocol.CodeServerError, `mcpgate: tool "x" is not allowed by the policy of server "s"`, false},
	} {
		if got := isDenial(tt.code, tt.msg); got != tt.want {
			t.Errorf("isDenial(%d, %q) = %v, want %v", tt.code, tt.msg, got, tt.want)
		}
	}
}

type nopObserver struct{}

func (nopObserver) Request(audit.Record) {}

// BenchmarkPOSTObserved is BenchmarkPOST with an Observer (what metrics
// cost a request): the audit code path without an audit log.
func BenchmarkPOSTObserved(b *testing.B) {
	m := mux.New(mux.Options{Name: "bench"})
	defer m.Close()
	m.SetUpstream(testkit.Genless(&loopback{m: m}))
	m.Started(1)
	h := New(Config{Backends: map[string]conn.Backend{"echo": muxBackend{m: m}}, Observer: nopObserver{}})
	defer h.Close()
	post := func(body, session string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/servers/echo/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			r.Header.Set("Mcp-Session-Id", session)
			r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	init := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, "")
	session := init.Header().Get("Mcp-Session-Id")
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("x", 900) + `"}}}`
	b.ReportAllocs()
	for b.Loop() {
		if w := post(body, session); w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
