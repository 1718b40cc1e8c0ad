package remote

import (
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestAutoUnreachableAnswersEveryRequest: with the server unreachable, an
// auto Client answers a request sent before initialize, the initialize, and
// the requests after it, each with an error naming the cause. The old code
// left every message after a failed probe waiting for a transport decision
// that never came.
func TestAutoUnreachableAnswersEveryRequest(t *testing.T) {
	url := "http://" + testkit.FreeAddr(t) + "/mcp"
	c, r := start(t, Config{URL: url})
	send(t, c, `{"jsonrpc":"2.0","id":"early","method":"tools/list"}`)
	send(t, c, initReq)
	send(t, c, inited)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if err := c.TrySend([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)); err != nil {
		t.Fatalf("TrySend: %v", err)
	}
	want := "mcpgate: remote " + url + " unreachable: connection refused"
	for _, id := range []string{`"early"`, `1`, `2`, `3`} {
		if got := r.waitLine(`"id":`+id+`,`, `"error"`); !strings.Contains(got, want) {
			t.Errorf("reply to %s: %s\nwant the message %q", id, got, want)
		}
	}
}

// TestAutoRequestBeforeInitialize: a request sent before initialize to a
// reachable Streamable HTTP server is answered, and the initialize after it
// still decides the transport.
func TestAutoRequestBeforeInitialize(t *testing.T) {
	f := newFake(t)
	c, r := start(t, Config{URL: f.run()})
	send(t, c, `{"jsonrpc":"2.0","id":"early","method":"tools/list"}`)
	if got := r.waitLine(`"id":"early"`); !strings.Contains(got, "HTTP 404") {
		t.Errorf("early request answered %s", got)
	}
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	r.waitLine(`"id":2`, `"method":"tools/list"`)
}

func TestUnreachableError(t *testing.T) {
	url := "http://" + testkit.FreeAddr(t) + "/mcp?token=secret"
	c, _ := start(t, Config{URL: url, Transport: TransportHTTP})
	_, err := c.do(c.newRequest(t.Context(), http.MethodGet, c.base, nil, session{}), nil)
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "secret") ||
		!strings.HasSuffix(err.Error(), "unreachable: connection refused") {
		t.Errorf("err = %v", err)
	}
}

// TestCancelledAbortsExchange: notifications/cancelled for a request whose
// server never answers aborts its exchange at once (the server sees the
// client go away; goroutines return to where they were), and no reply is
// synthesized for it. Before, the exchange lived until the session ended.
func TestCancelledAbortsExchange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers bool // the server sends SSE headers before hanging
	}{{"no headers", false}, {"open stream", true}} {
		t.Run(tc.name, func(t *testing.T) {
			entered := make(chan struct{})
			left := make(chan struct{})
			f := newFake(t)
			f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
				if method != "slow" {
					return false
				}
				if tc.headers {
					w.Header().Set("Content-Type", "text/event-stream")
					flushWrite(w, ": priming\n\n")
				}
				close(entered)
				<-r.Context().Done()
				close(left)
				return true
			}
			c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
			initialize(t, c, r)
			send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			r.waitLine(`"id":2`)
			// Idle keep-alive connections are not the exchange's: close
			// them before counting, here and below.
			c.hc.CloseIdleConnections()
			baseline := runtime.NumGoroutine()

			send(t, c, `{"jsonrpc":"2.0","id":7,"method":"slow"}`)
			testkit.Receive(t, entered, "the slow request to reach the server")
			if err := c.TrySend([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"timeout"}}`)); err != nil {
				t.Fatal(err)
			}
			testkit.Receive(t, left, "the server to see the client abort the exchange")
			testkit.SettleGoroutines(t, "after Close", baseline, c.hc.CloseIdleConnections)
			if got := r.lines(`"id":7`); len(got) != 0 {
				t.Errorf("a reply was synthesized for the cancelled request: %q", got)
			}
			// The Client still works.
			send(t, c, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
			r.waitLine(`"id":8`)
		})
	}
}

// TestCloseAbortsExchange: Close ends an exchange the server never answers
// without waiting for it.
func TestCloseAbortsExchange(t *testing.T) {
	entered := make(chan struct{})
	f := newFake(t)
	f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
		close(entered)
		<-r.Context().Done()
		return true
	}
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":7,"method":"slow"}`)
	testkit.Receive(t, entered, "the request to reach the server")
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	testkit.Receive(t, closed, "Close to return")
}

// TestSendGenOnlyToItsGeneration: SendGen and TrySendGen reach the
// generation they name and nothing else. Once a legacy SSE stream is lost,
// a message for its generation is refused with ErrNotConnected, also after
// the next generation started: an answer meant for the lost upstream
// session (the reply to its server request) never reaches its successor,
// which did not ask. Generation 0 is never running.
func TestSendGenOnlyToItsGeneration(t *testing.T) {
	f := newLegacyFake(t)
	c, r := start(t, Config{URL: f.run(), Transport: TransportSSE})
	send(t, c, initReq)
	r.waitLine(`"id":1`)
	if err := c.TrySendGen(1, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)); err != nil {
		t.Fatalf("TrySendGen(1) while 1 runs: %v", err)
	}
	r.waitLine(`"id":2`, `"sid":1`)
	if err := c.TrySendGen(0, []byte(`{"jsonrpc":"2.0","id":"zero","method":"tools/list"}`)); !errors.Is(err, ErrNotConnected) {
		t.Errorf("TrySendGen(0) = %v, want ErrNotConnected", err)
	}

	f.dropStream(1)
	r.waitKind("exited", 1)
	r.waitKind("started", 2)
	stale := []byte(`{"jsonrpc":"2.0","id":"stale","method":"tools/list"}`)
	if err := c.TrySendGen(1, stale); !errors.Is(err, ErrNotConnected) {
		t.Errorf("TrySendGen(1) after generation 2 started = %v, want ErrNotConnected", err)
	}
	if err := c.SendGen(t.Context(), 1, stale); !errors.Is(err, ErrNotConnected) {
		t.Errorf("SendGen(1) after generation 2 started = %v, want ErrNotConnected", err)
	}
	if err := c.SendGen(t.Context(), 2, []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)); err != nil {
		t.Fatalf("SendGen(2) while 2 runs: %v", err)
	}
	r.waitLine(`"id":3`, `"sid":2`)
	c.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.posts {
		if strings.Contains(p.body, `"stale"`) || strings.Contains(p.body, `"zero"`) {
			t.Errorf("refused message was POSTed: %s", p.body)
		}
	}
}
