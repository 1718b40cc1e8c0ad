package front

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A Host not allowed gets 403 naming it, before anything else is checked
// (here: before the unknown server would get its 404).
func TestHostCheckedFirst(t *testing.T) {
	b := newFakeBackend()
	h := New(Config{Backends: map[string]conn.Backend{"x": b}, HostAllowed: func(h string) bool { return h == "localhost" || h == "::1" }})
	defer h.Close()
	for host, want := range map[string]int{"evil.example:80": 403, "LOCALHOST:1": 404, "[::1]:9": 404, "localhost:1,evil.example": 403} {
		r := httptest.NewRequest(http.MethodPost, "/servers/nope/mcp", strings.NewReader("{}"))
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want || want == 403 && !strings.Contains(w.Body.String(), `evil.example\" is not allowed`) {
			t.Errorf("Host %q: %d %s, want %d", host, w.Code, w.Body, want)
		}
	}
}

// A GET that does not list text/event-stream itself never opens a legacy
// session (curl sends "*/*"; it used to start a session and, in session
// mode, a process).
func TestGETWithoutEventStreamOpensNothing(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{})
	for _, c := range []struct{ path, accept string }{
		{mcpPath, "*/*"}, {mcpPath, ""}, {"/servers/x/sse", ""}, {"/servers/x/sse", "text/*"},
	} {
		resp, body := do(t, srv, http.MethodGet, c.path, "", "Accept", c.accept)
		// /mcp has sessions and the stateless revision, which has no GET:
		// 405; the legacy /sse endpoint is all GET: 406.
		want := http.StatusNotAcceptable
		if c.path == mcpPath {
			want = http.StatusMethodNotAllowed
		}
		if resp.StatusCode != want || !strings.Contains(body, "text/event-stream") {
			t.Errorf("GET %s Accept %q: %d %s, want %d", c.path, c.accept, resp.StatusCode, body, want)
		}
	}
	if n := b.opens.Load(); n != 0 {
		t.Fatalf("%d sessions opened", n)
	}
}

// A failed initialize answers its error without an Mcp-Session-Id: the
// session was removed (it used to name it anyway).
func TestFailedInitializeHasNoSessionID(t *testing.T) {
	for _, v := range []string{"2025-06-18", "2025-11-25"} {
		b := newFakeBackend()
		b.initError, b.version = true, v
		h, srv := testServer(t, b, Config{})
		resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" || !strings.Contains(body, "command not found") || h.Sessions() != 0 {
			t.Fatalf("%s: session id %q, %d sessions, body %s", v, id, h.Sessions(), body)
		}
	}
}

type startingErr struct{ d time.Duration }

func (e startingErr) Error() string             { return "server x is starting" }
func (e startingErr) RetryAfter() time.Duration { return e.d }

func TestOpenErrorRetryAfter(t *testing.T) {
	b := newFakeBackend()
	b.openErr = fmt.Errorf("open: %w", startingErr{1500 * time.Millisecond})
	_, srv := testServer(t, b, Config{})
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, "starting") {
		t.Fatalf("%d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if limits.RetryAfter(0) != "1" || limits.RetryAfter(time.Second) != "1" {
		t.Fatal("Retry-After must be at least 1 and rounded up")
	}
}

// A stalled upload gets 408 and its connection closed within
// BodyReadTimeout; an announced length over the limit gets 413 unread.
func TestStalledAndOversizedBodies(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{BodyReadTimeout: 200 * time.Millisecond, MaxBodyBytes: 1 << 20})
	send := func(contentLength int, body string) string {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", mcpPath, contentLength, body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Status
	}
	if got := send(1<<20, `{"jsonrpc":`); !strings.HasPrefix(got, "408") {
		t.Fatalf("stalled body: %s", got)
	}
	if got := send(2<<20, ""); !strings.HasPrefix(got, "413") {
		t.Fatalf("oversized body: %s", got)
	}
}

// The body deadline is lifted once the body is read: an SSE reply that
// takes longer than BodyReadTimeout is not cut.
func TestBodyDeadlineDoesNotCutReplies(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-11-25"
	_, srv := testServer(t, b, Config{BodyReadTimeout: 50 * time.Millisecond})
	sid := initSession(t, srv)
	conn := testkit.Receive(t, b.conns, "open")
	got := postAsync(t, srv, sid, "2025-11-25", holdReq)
	testkit.Receive(t, conn.held, "the request")
	// Outlive the read deadline several times over before the reply.
	<-time.After(300 * time.Millisecond)
	conn.release()
	if reply := testkit.Receive(t, got, "the reply"); !strings.Contains(reply, `"released":true`) {
		t.Fatalf("reply: %s", reply)
	}
}

// Reading a body of announced length allocates its buffer and nothing else
// (it used to add a MaxBytesReader and, on writers without read deadlines,
// two errors from http.ResponseController: a POST's hot path).
func TestReadBodyAllocations(t *testing.T) {
	h := New(Config{Logger: slog.New(slog.DiscardHandler)})
	defer h.Close()
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	rd := strings.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, mcpPath, nil)
	r.Body, r.ContentLength = io.NopCloser(rd), int64(len(body))
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() {
		rd.Reset(body)
		if b, err := h.readBody(w, r); err != nil || string(b) != body {
			t.Fatalf("%q %v", b, err)
		}
	}); n > 1 {
		t.Fatalf("%.1f allocations per body, want 1", n)
	}
}
