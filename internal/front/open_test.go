package front

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A session whose Backend.Open takes longer than the idle timeout (a
// session-mode process being started) is not expired by the sweeper while it
// opens: the initialize used to be refused with 503 "shutting down" although
// nothing was shutting down, and a legacy client got a stream that ended at
// once.
func TestSweepDuringOpenKeepsTheSession(t *testing.T) {
	for _, path := range []string{mcpPath, "/servers/x/sse"} {
		t.Run(path, func(t *testing.T) {
			b := newFakeBackend()
			b.openEntered, b.openBlock = make(chan struct{}, 1), make(chan struct{})
			h, srv := testServer(t, b, Config{IdleTimeout: time.Millisecond, SweepInterval: time.Hour})
			got := make(chan string, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() {
				method, body := http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`
				if path != mcpPath {
					method, body = http.MethodGet, ""
				}
				req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := srv.Client().Do(req)
				if err != nil {
					got <- err.Error()
					return
				}
				defer resp.Body.Close()
				// The first line is enough: a JSON reply or "event: endpoint".
				line, _ := bufio.NewReader(resp.Body).ReadString('\n')
				got <- resp.Status + " " + resp.Header.Get("Mcp-Session-Id") + "\n" + line
			}()
			testkit.Receive(t, b.openEntered, "Open to be called")
			h.Sweep(time.Now().Add(time.Hour))
			close(b.openBlock)
			reply := testkit.Receive(t, got, "the answer")
			if !strings.HasPrefix(reply, "200 ") || strings.Contains(reply, "shutting down") {
				t.Fatalf("answer: %s", reply)
			}
			if path == mcpPath && strings.Fields(reply)[2] == "" {
				t.Fatalf("no session id: %s", reply)
			}
			if n := h.Sessions(); n != 1 {
				t.Fatalf("%d sessions after the open, want 1", n)
			}
		})
	}
}

// A client hammering initialize on a server that refuses new sessions (a
// session-mode server at maxProcesses) costs a bounded number of log lines,
// with the count of those held back: it used to log one ERROR line per
// request (94,592 lines, 16 MB, in ten seconds against the binary).
func TestOpenFailureLogIsRateLimited(t *testing.T) {
	b := newFakeBackend()
	b.openErr = errors.New("server x already runs 16 processes")
	var logs testkit.SyncBuffer
	_, srv := testServer(t, b, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const n = 200
	for range n {
		resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "16 processes") {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if lines := strings.Count(logs.String(), "opening session failed"); lines < 1 || lines > 5 {
		t.Fatalf("%d log lines for %d refused opens, want 1 to 5:\n%s", lines, n, logs.String())
	}
}

// leavingBackend's Open returns only after the client's request context
// ended (the client left while its session's process was being started),
// and then succeeds, as a backend whose start cannot be cancelled does.
type leavingBackend struct{ *fakeBackend }

func (b leavingBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	return b.fakeBackend.Open(ctx, general)
}

// A client that leaves during Backend.Open (session mode: while its process
// starts) never learns its session id, so the session ends at once: it used
// to be initialized and kept, holding a process (one of maxProcesses) until
// the idle timeout, 30 minutes by default. Against the binary, 105,918
// initializes abandoned after 1 to 5 ms left 16 processes running.
func TestClientLeftDuringOpenEndsTheSession(t *testing.T) {
	fb := newFakeBackend()
	cfg := Config{Backends: map[string]conn.Backend{"x": leavingBackend{fb}}, Logger: slog.New(slog.DiscardHandler)}
	h := New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+mcpPath,
		strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	done := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	testkit.WaitFor(t, "the session to exist and Open to run", func() bool { return h.Sessions() != 0 })
	cancel()
	testkit.Receive(t, done, "the client to give up")
	testkit.WaitFor(t, "the session to end and its connection to close", func() bool { return h.Sessions() == 0 && fb.closes.Load() != 0 })
	if n, c := h.Sessions(), fb.closes.Load(); n != 0 || c != 1 || fb.opens.Load() != 1 {
		t.Fatalf("after the client left: %d sessions, connection opened %d and closed %d times", n, fb.opens.Load(), c)
	}
}
