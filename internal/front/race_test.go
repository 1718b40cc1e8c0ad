package front

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A session ended by Close while its Backend.Open was still running (the
// session was created, its connection not yet recorded) still gets its
// connection closed, exactly once, and the client an error: the connection
// used to be recorded after Close had found none to close, and stayed open
// for good (in session mode, a process).
func TestCloseDuringOpenClosesTheConnection(t *testing.T) {
	for _, path := range []string{mcpPath, "/servers/x/sse"} {
		t.Run(path, func(t *testing.T) {
			b := newFakeBackend()
			b.openEntered, b.openBlock = make(chan struct{}, 1), make(chan struct{})
			h, srv := testServer(t, b, Config{})
			got := make(chan string, 1)
			go func() {
				method, body, hdr := http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, []string{}
				if path != mcpPath {
					method, body, hdr = http.MethodGet, "", []string{"Accept", "text/event-stream"}
				}
				resp, b := do(t, srv, method, path, body, hdr...)
				got <- resp.Status + " " + resp.Header.Get("Mcp-Session-Id") + "\n" + b
			}()
			testkit.Receive(t, b.openEntered, "Open to be called")
			h.Close()
			close(b.openBlock)
			reply := testkit.Receive(t, got, "the answer")
			if !strings.HasPrefix(reply, "503 ") || !strings.Contains(reply, "shutting down") {
				t.Fatalf("answer: %s", reply)
			}
			// The handler closed it before answering.
			if n := b.closes.Load(); n != 1 || h.Sessions() != 0 {
				t.Fatalf("connection closed %d times, %d sessions left", n, h.Sessions())
			}
		})
	}
}

// When a connection is too slow to close, Close answers its requests itself
// (closing their streams) and still waits for the handlers writing those
// answers, within its bound: it used to spend the whole bound on the
// connections and return at once, before the handlers had written anything.
func TestCloseWaitsForHandlersAfterSlowConnections(t *testing.T) {
	b := newFakeBackend()
	b.closeBlock = make(chan struct{})
	defer close(b.closeBlock)
	h, srv := testServer(t, b, Config{})
	sid := initSession(t, srv)
	conn := testkit.Receive(t, b.conns, "open")
	got := postAsync(t, srv, sid, "2025-06-18", holdReq)
	testkit.Receive(t, conn.held, "the request to reach the server")
	start := time.Now()
	h.Close()
	// One closeWait goes to the blocked connection; a Close that then
	// waited a whole bound again for the handlers would take two.
	if d := time.Since(start); d >= 2*closeWait {
		t.Fatalf("Close took %v", d)
	}
	if !h.handlers.wait(0) {
		t.Fatal("Close returned while the request's handler was still answering")
	}
	if reply := testkit.Receive(t, got, "the reply"); !strings.Contains(reply, `"id":7`) || !strings.Contains(reply, "shutting down") {
		t.Fatalf("reply: %s", reply)
	}
}

// An initialize that got a log message and then no reply before its session
// ended is answered with that message once and an error: the handler's own
// error (which has no seq) used to restart the stream from the beginning,
// sending the log message twice.
func TestUnansweredInitializeSendsEachMessageOnce(t *testing.T) {
	b := newFakeBackend()
	b.initHold, b.silentClose = true, true
	h, srv := testServer(t, b, Config{})
	got := make(chan string, 1)
	go func() {
		_, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
		got <- body
	}()
	conn := testkit.Receive(t, b.conns, "open")
	testkit.Receive(t, conn.held, "the initialize to reach the server")
	h.Close()
	body := testkit.Receive(t, got, "the answer")
	if n := strings.Count(body, `"starting"`); n != 1 || !strings.Contains(body, `"id":0`) || !strings.Contains(body, "did not answer initialize") {
		t.Fatalf("log message sent %d times; answer:\n%s", n, body)
	}
}
