package servers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	testkit.Main()
	goleak.VerifyTestMain(m)
}

// testLogger sends warnings and errors to the test log.
func testLogger(t testing.TB) *slog.Logger { return testkit.Logger(t, slog.LevelWarn) }

// fakeServer is a stdio server entry running the testkit fake.
func fakeServer(name string, opts testkit.FakeOptions) *config.Server {
	cmd, args, env := testkit.Command(opts)
	s := testServer(name)
	s.Command, s.Args = cmd, args
	s.Env = map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		s.Env[k] = v
	}
	return s
}

// stream collects what a session receives.
type stream struct {
	mu      sync.Mutex
	replies [][]byte
	got     chan struct{} // signalled on each reply
}

func newStream() *stream { return &stream{got: make(chan struct{}, 100)} }

func (s *stream) Send([]byte) {}

func (s *stream) Reply(msg []byte) {
	s.mu.Lock()
	s.replies = append(s.replies, append([]byte(nil), msg...))
	s.mu.Unlock()
	select {
	case s.got <- struct{}{}:
	default:
	}
}

// next waits for the next reply.
func (s *stream) next(t *testing.T) []byte {
	t.Helper()
	select {
	case <-s.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no reply within 30s")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replies[len(s.replies)-1]
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func handle(t *testing.T, c conn.Conn, raw string, out *stream) {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	c.Handle(context.Background(), &m, out)
}

// TestMissingCommandIsServedWithErrors: a server whose command does not
// exist does not fail New (the gateway keeps running); its clients get a
// JSON-RPC error that names the cause, at once rather than after a timeout.
func TestMissingCommandIsServedWithErrors(t *testing.T) {
	cfg := testServer("missing")
	cfg.Command = "mcpgate-test-no-such-command"
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatalf("New: %v (a server that cannot start must not stop the gateway)", err)
	}
	defer s.Close()
	out := newStream()
	c, err := s.Open(context.Background(), newStream())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	handle(t, c, initialize, out)
	reply := string(out.next(t))
	if !strings.Contains(reply, `"error"`) || !strings.Contains(reply, "command not found: mcpgate-test-no-such-command") {
		t.Errorf("reply %s: want an error naming the missing command", reply)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the error took %v: it must come at once, not after a timeout", d)
	}
}

// TestMaxProcesses: in session mode, sessions beyond maxProcesses are
// refused with an error carrying a Retry-After; a slot frees when a session
// ends and its process is gone.
func TestMaxProcesses(t *testing.T) {
	marker := fmt.Sprintf("maxprocs-%d", time.Now().UnixNano())
	cfg := fakeServer("capped", testkit.FakeOptions{Marker: marker})
	cfg.Isolation = config.IsolationSession
	cfg.MaxProcesses = 2
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var conns []conn.Conn
	for range 2 {
		c, err := s.Open(context.Background(), newStream())
		if err != nil {
			t.Fatalf("Open under the cap: %v", err)
		}
		conns = append(conns, c)
	}
	_, err = s.Open(context.Background(), newStream())
	var ra interface{ RetryAfter() time.Duration }
	if !errors.Is(err, ErrTooManyProcesses) || !errors.As(err, &ra) || ra.RetryAfter() <= 0 {
		t.Fatalf("Open over the cap: %v, want ErrTooManyProcesses with a RetryAfter", err)
	}
	if !strings.Contains(err.Error(), `"capped"`) || !strings.Contains(err.Error(), "maxProcesses") {
		t.Errorf("error %q does not name the server and the key", err)
	}
	// The HTTP front already prefixes "mcpgate: server NAME unavailable: ".
	if strings.HasPrefix(err.Error(), "mcpgate:") {
		t.Errorf("error %q repeats the mcpgate: prefix the HTTP front adds", err)
	}
	conns[0].Close()
	var c conn.Conn
	testkit.WaitFor(t, "a slot after a session ended", func() bool {
		c, err = s.Open(context.Background(), newStream())
		return err == nil
	})
	c.Close()
	conns[1].Close()
}

// TestIsolatedCloseIsParallel: closing a session-mode server whose
// processes ignore SIGTERM and EOF takes one stop (2*StopGrace and SIGKILL),
// not one per session; so does ending all its sessions at once.
func TestIsolatedCloseIsParallel(t *testing.T) {
	const sessions = 4
	marker := fmt.Sprintf("parallel-%d", time.Now().UnixNano())
	cfg := fakeServer("stubborn", testkit.FakeOptions{Marker: marker, IgnoreSIGTERM: true, IgnoreStdinEOF: true})
	cfg.Isolation = config.IsolationSession
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var conns []conn.Conn
	for range sessions {
		c, err := s.Open(context.Background(), newStream())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	testkit.WaitFor(t, "every process to start", func() bool { return len(testkit.Procs(marker)) == sessions })
	// One stop takes 2*StopGrace; sequential stops would take sessions
	// times that. Allow anything below two.
	bound := 2 * (2 * StopGrace)
	start := time.Now()
	for _, c := range conns[:sessions/2] {
		c.Close() // must not wait for the process
	}
	// Waiting for a process that ignores SIGTERM takes StopGrace at least.
	if d := time.Since(start); d >= StopGrace {
		t.Errorf("ending %d sessions took %v: a session's Close must not wait for its process", sessions/2, d)
	}
	s.Close()
	if d := time.Since(start); d >= bound {
		t.Errorf("Close took %v with %d stubborn processes, want under %v (one stop, not one per process)", d, sessions, bound)
	}
	if left := testkit.WaitProcsGone(marker, 5*time.Second); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
}
