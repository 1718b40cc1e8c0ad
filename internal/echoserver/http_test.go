package echoserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/sse"
)

type httpFixture struct {
	t   *testing.T
	h   *Handler
	srv *httptest.Server
}

func newHTTPFixture(t *testing.T) *httpFixture {
	h := NewHandler()
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return &httpFixture{t: t, h: h, srv: srv}
}

func (f *httpFixture) do(method, session, body string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.srv.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f *httpFixture) initialize(version string) string {
	f.t.Helper()
	resp := f.do("POST", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`"}}`)
	body := readAll(f.t, resp)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" || !strings.Contains(body, `"protocolVersion":"`+version+`"`) {
		f.t.Fatalf("initialize: %s, session %q, %s", resp.Status, id, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		f.t.Fatalf("initialize Content-Type %q, want application/json (as the gateway answers it)", ct)
	}
	return id
}

const echoCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`
const echoReply = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}]}}`

func TestHTTPJSONFor20250618(t *testing.T) {
	f := newHTTPFixture(t)
	id := f.initialize("2025-06-18")
	if resp := f.do("POST", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notification: %s", resp.Status)
	}
	resp := f.do("POST", id, echoCall)
	if body := readAll(t, resp); resp.StatusCode != 200 || body != echoReply || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("call: %s %q %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
}

// TestHTTPJSONFor20251125: every reply is one JSON body by default, in
// 2025-11-25 too (the limit the benchmarks measure against).
func TestHTTPJSONFor20251125(t *testing.T) {
	f := newHTTPFixture(t)
	id := f.initialize("2025-11-25")
	resp := f.do("POST", id, echoCall)
	if body := readAll(t, resp); resp.StatusCode != 200 || body != echoReply || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("call: %s %q %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
}

// TestHTTPSSEWithPrimingFor20251125: with SSEReplies, 2025-11-25 replies
// are a priming event and the reply on an SSE stream.
func TestHTTPSSEWithPrimingFor20251125(t *testing.T) {
	f := newHTTPFixture(t)
	f.h.SSEReplies = true
	id := f.initialize("2025-11-25")
	resp := f.do("POST", id, echoCall)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("call: %s %q", resp.Status, ct)
	}
	r := sse.NewReader(resp.Body, 0)
	prime, err := r.Next()
	if err != nil || !strings.HasSuffix(prime.ID, "-0") || len(prime.Data) != 0 || prime.Retry == 0 {
		t.Fatalf("priming event %+v, %v; want an id N-0, a retry and no data", prime, err)
	}
	ev, err := r.Next()
	stream := strings.TrimSuffix(prime.ID, "-0")
	if err != nil || ev.Event != "message" || ev.ID != stream+"-1" || string(ev.Data) != echoReply {
		t.Fatalf("reply event %+v, %v", ev, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the reply: %v, want the stream to end", err)
	}
}

func TestHTTPSessions(t *testing.T) {
	f := newHTTPFixture(t)
	if resp := f.do("POST", "", echoCall); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no session: %s, want 400", resp.Status)
	}
	if resp := f.do("POST", "nope", echoCall); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown session: %s, want 404", resp.Status)
	}
	if resp := f.do("POST", "", `{"jsonrpc":`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("garbage: %s, want 400", resp.Status)
	}
	a, b := f.initialize("2025-06-18"), f.initialize("2025-11-25")
	if a == b || f.h.Sessions() != 2 {
		t.Fatalf("sessions %q %q, count %d", a, b, f.h.Sessions())
	}
	if resp := f.do("DELETE", a, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	if resp := f.do("POST", a, echoCall); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleted session: %s, want 404", resp.Status)
	}
	if resp := f.do("DELETE", a, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("second DELETE: %s, want 404", resp.Status)
	}
	if f.h.Sessions() != 1 {
		t.Errorf("%d sessions left, want 1", f.h.Sessions())
	}
}

// TestHTTPGetStream opens a session's GET stream, checks a second one is
// refused, and that DELETE ends the first.
func TestHTTPGetStream(t *testing.T) {
	f := newHTTPFixture(t)
	id := f.initialize("2025-11-25")
	get := func() *http.Response {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", f.srv.URL+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := get()
	defer first.Body.Close()
	if first.StatusCode != 200 || f.h.Streams() != 1 {
		t.Fatalf("GET: %s, %d streams", first.Status, f.h.Streams())
	}
	r := sse.NewReader(first.Body, 0)
	if ev, err := r.Next(); err != nil || ev.ID != "0-0" {
		t.Fatalf("priming event %+v, %v", ev, err)
	}
	if second := get(); second.StatusCode != http.StatusConflict {
		t.Errorf("second GET: %s, want 409", second.Status)
	} else {
		second.Body.Close()
	}
	if resp := f.do("DELETE", id, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("stream after DELETE: %v, want EOF", err)
	}
}

// TestHTTPMegabyteMessage echoes a 1 MiB message exactly, as a JSON body
// and as an SSE event.
func TestHTTPMegabyteMessage(t *testing.T) {
	msg := "big-" + strings.Repeat("0123456789abcdef", 1<<16)
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + msg + `"}}}`
	want := `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"` + msg + `"}]}}`
	for _, sseReplies := range []bool{false, true} {
		f := newHTTPFixture(t)
		f.h.SSEReplies = sseReplies
		id := f.initialize("2025-11-25")
		for range 3 { // the pooled body buffer is reused
			resp := f.do("POST", id, call)
			var got string
			if sseReplies {
				r := sse.NewReader(resp.Body, 4<<20)
				r.Next() // priming
				ev, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				got = string(ev.Data)
				resp.Body.Close()
			} else {
				got = readAll(t, resp)
			}
			if resp.StatusCode != 200 || got != want {
				t.Fatalf("sse %v: %s, reply of %d bytes, want %d", sseReplies, resp.Status, len(got), len(want))
			}
		}
	}
}

// statelessCall is echoCall as a request of the stateless revision.
const statelessCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"message":"hello"}}}`
const statelessReply = `{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[{"type":"text","text":"hello"}]}}`

// post sends a POST without a session and with the given headers.
func (f *httpFixture) post(body string, header ...string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), "POST", f.srv.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestHTTPStateless: requests of 2026-07-28 are answered without
// initialize or session, with one JSON body (SSEReplies or not), beside a
// session of 2025-11-25 whose replies do not change.
func TestHTTPStateless(t *testing.T) {
	for _, sseReplies := range []bool{false, true} {
		f := newHTTPFixture(t)
		f.h.SSEReplies = sseReplies
		discover := f.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
			`"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "server/discover")
		if body := readAll(t, discover); discover.StatusCode != 200 || !strings.Contains(body, `"supportedVersions":["2026-07-28",`) {
			t.Fatalf("server/discover: %s %s", discover.Status, body)
		}
		for range 2 {
			resp := f.post(statelessCall, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
			body := readAll(t, resp)
			if resp.StatusCode != 200 || body != statelessReply || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Mcp-Session-Id") != "" {
				t.Fatalf("sse %v: stateless call: %s %q session %q %s", sseReplies, resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("Mcp-Session-Id"), body)
			}
		}
		if f.h.Sessions() != 0 {
			t.Fatalf("%d sessions after stateless requests, want 0", f.h.Sessions())
		}
		id := f.initialize("2025-06-18")
		if resp := f.do("POST", id, echoCall); readAll(t, resp) != echoReply {
			t.Fatalf("session call after stateless ones: %s", resp.Status)
		}
	}
}

// TestHTTPStatelessRefused: the checks of a stateless POST, each answered
// 400 with the JSON-RPC error naming it and the request's id; a legacy POST
// without a session still needs one.
func TestHTTPStatelessRefused(t *testing.T) {
	v999 := strings.Replace(statelessCall, `"2026-07-28"`, `"v999"`, 1)
	tests := []struct {
		name, body string
		header     []string
		code       string
	}{
		{"no MCP-Protocol-Version", statelessCall, []string{"Mcp-Method", "tools/call"}, `"code":-32020`},
		{"header differs from _meta", statelessCall, []string{"MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/call"}, `"code":-32020`},
		{"no Mcp-Method", statelessCall, []string{"MCP-Protocol-Version", "2026-07-28"}, `"code":-32020`},
		{"Mcp-Method differs", statelessCall, []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}, `"code":-32020`},
		{"modern header, no _meta", echoCall, []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call"}, `"code":-32602`},
		{"unsupported version", v999, []string{"MCP-Protocol-Version", "v999", "Mcp-Method", "tools/call"},
			`"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"v999"}`},
		{"legacy POST without a session", echoCall, []string{"MCP-Protocol-Version", "2025-11-25"}, "missing Mcp-Session-Id"},
	}
	f := newHTTPFixture(t)
	for _, tt := range tests {
		resp := f.post(tt.body, tt.header...)
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tt.code) || (tt.code[0] == '"' && !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":7,`)) {
			t.Errorf("%s: %s %s; want 400 with %s and id 7", tt.name, resp.Status, body, tt.code)
		}
	}
	resp := f.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, "MCP-Protocol-Version", "2026-07-28")
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("stateless notification: %s, want 202", resp.Status)
	}
	if f.h.Sessions() != 0 {
		t.Errorf("%d sessions, want 0", f.h.Sessions())
	}
}
