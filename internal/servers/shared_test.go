package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// These tests run the stateless revision's second process (shared.go)
// against real children: the testkit fake as a dual-era server, as a
// server of the session eras, and as one that ignores server/discover; and
// the Go SDK's conformance server when scripts/peers.sh installed it.

// modernMeta is the per-request _meta of a stateless request.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s}`

// recorder is a Stream recording everything it gets.
type recorder struct {
	mu      sync.Mutex
	sends   []string
	replies []string
	got     chan struct{}
}

func newRecorder() *recorder { return &recorder{got: make(chan struct{}, 1)} }

func (r *recorder) Send(msg []byte) {
	r.mu.Lock()
	r.sends = append(r.sends, string(msg))
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) Reply(msg []byte) {
	r.mu.Lock()
	r.replies = append(r.replies, string(msg))
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) signal() {
	select {
	case r.got <- struct{}{}:
	default:
	}
}

// wait waits until cond holds on what r got (checked under r.mu).
func (r *recorder) wait(t *testing.T, what string, cond func(sends, replies []string) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		ok := cond(r.sends, r.replies)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *recorder) reply(t *testing.T) string {
	t.Helper()
	var out string
	r.wait(t, "a reply", func(_, replies []string) bool {
		if len(replies) > 0 {
			out = replies[0]
		}
		return len(replies) > 0
	})
	return out
}

// passthrough reports whether c is a client of the second process.
func passthrough(c conn.StatelessConn) bool {
	return c.Passthrough()
}

func openStateless(t *testing.T, s Server, caps string) conn.StatelessConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.OpenStateless(ctx, newRecorder(), protocol.StatelessVersion, []byte(caps))
	if err != nil {
		t.Fatalf("OpenStateless: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// callTool sends a stateless tools/call of tool on c and returns the reply.
func callTool(t *testing.T, c conn.Conn, tool, args string) string {
	t.Helper()
	out := newRecorder()
	raw := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s,`+modernMeta+`}}`, tool, args, "{}")
	msg, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	c.Handle(context.Background(), &msg, out)
	return out.reply(t)
}

// toolText returns the text of a one-block tools/call result.
func toolText(reply string) string {
	_, rest, _ := strings.Cut(reply, `"text":"`)
	text, _, _ := strings.Cut(rest, `"`)
	return text
}

func newMarked(t *testing.T, name string, opts testkit.FakeOptions, protocol string) (Server, string) {
	t.Helper()
	opts.Marker = fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	cfg := fakeServer(name, opts)
	cfg.Protocol = protocol
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if left := testkit.WaitProcsGone(opts.Marker, 5*time.Second); len(left) > 0 {
			t.Errorf("processes left after Close: %v", left)
		}
	})
	return s, opts.Marker
}

// TestStatelessModernServerDetected: with protocol auto, the first
// stateless request starts a second process; it answers server/discover
// as a 2026-07-28 server, so stateless requests go to it (Passthrough) and
// it never sees initialize, while sessions keep the first process. Its
// requests count in Pending.
func TestStatelessModernServerDetected(t *testing.T) {
	s, marker := newMarked(t, "dual", testkit.FakeOptions{Modern: true}, config.ProtocolAuto)
	if n := len(testkit.Procs(marker)); n != 1 {
		t.Fatalf("%d processes before any stateless request, want 1", n)
	}
	c := openStateless(t, s, `{}`)
	if !passthrough(c) {
		t.Fatal("a dual-era server's stateless request is not passed through")
	}
	if got := toolText(callTool(t, c, "initialized", `{}`)); got != "false" {
		t.Errorf("the stateless process saw initialize: %q", got)
	}
	if n := len(testkit.Procs(marker)); n != 2 {
		t.Errorf("%d processes, want 2", n)
	}
	session, err := s.Open(context.Background(), newStream())
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	out := newStream()
	handle(t, session, initialize, out)
	out.next(t)
	handle(t, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"initialized","arguments":{}}}`, out)
	if got := toolText(string(out.next(t))); got != "true" {
		t.Errorf("the sessions' process: initialized %q", got)
	}
	slow := newRecorder()
	msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000},`+modernMeta+`}}`, "{}"))
	c.Handle(context.Background(), &msg, slow)
	testkit.WaitFor(t, "the stateless request to count in Pending", func() bool { return s.Pending() == 1 })
	c.Abandon(slow)
	if n := s.Pending(); n != 0 {
		t.Errorf("Pending = %d after Abandon", n)
	}
}

// TestStatelessLegacyServerFallsBack: a server that answers server/discover
// with an error is of the session eras: the second process is stopped,
// stateless requests are translated (for an initialized translation
// process beside the sessions'), and no second process is started again.
func TestStatelessLegacyServerFallsBack(t *testing.T) {
	s, marker := newMarked(t, "legacy", testkit.FakeOptions{}, config.ProtocolAuto)
	c := openStateless(t, s, `{}`)
	if passthrough(c) {
		t.Fatal("a legacy server's stateless request is passed through")
	}
	if got := toolText(callTool(t, c, "initialized", `{}`)); got != "true" {
		t.Errorf("served by a process that was not initialized: %q", got)
	}
	// The sessions' process and the translation process remain.
	testkit.WaitFor(t, "the second process to stop", func() bool { return len(testkit.Procs(marker)) == 2 })
	if c := openStateless(t, s, `{}`); passthrough(c) {
		t.Error("passed through after the fallback")
	} else if got := toolText(callTool(t, c, "initialized", `{}`)); got != "true" {
		t.Errorf("after the fallback, served by a process that was not initialized: %q", got)
	}
	if n := len(testkit.Procs(marker)); n != 2 {
		t.Errorf("%d processes after the fallback, want 2: the verdict is kept", n)
	}
}

// TestStatelessProbeTimeoutFallsBack: a server that never answers
// server/discover counts as legacy once the probe's bound (here
// initTimeout, under the 5s default) passes.
func TestStatelessProbeTimeoutFallsBack(t *testing.T) {
	opts := testkit.FakeOptions{IgnoreDiscover: true, Marker: fmt.Sprintf("silent-%d", time.Now().UnixNano())}
	cfg := fakeServer("silent", opts)
	// The bound also times the translation process's initialize: short
	// enough to show the probe gives up before the 5s default, long
	// enough for an initialize on a busy machine.
	const bound = 2 * time.Second
	cfg.InitTimeout = bound
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.Close()
		if left := testkit.WaitProcsGone(opts.Marker, 5*time.Second); len(left) > 0 {
			t.Errorf("processes left: %v", left)
		}
	}()
	c := openStateless(t, s, `{}`)
	if passthrough(c) {
		t.Fatal("a server that ignores server/discover is passed through")
	}
	if got := toolText(callTool(t, c, "echo", `{"message":"hi"}`)); got != "hi" {
		t.Errorf("echo through the fallback: %q", got)
	}
}

// TestStatelessModernProcessRestarted: the second process is supervised
// like the first: after it crashes it is restarted and probed again, and
// stateless requests go to the new process (meanwhile they are
// translated).
func TestStatelessModernProcessRestarted(t *testing.T) {
	s, _ := newMarked(t, "restart", testkit.FakeOptions{Modern: true}, config.ProtocolAuto)
	c := openStateless(t, s, `{}`)
	if !passthrough(c) {
		t.Fatal("not passed through")
	}
	first := toolText(callTool(t, c, "pid", `{}`))
	if reply := callTool(t, c, "crash", `{}`); !strings.Contains(reply, `"error"`) {
		t.Fatalf("crash answered %s, want an error", reply)
	}
	var second string
	testkit.WaitFor(t, "a stateless request on the new process", func() bool {
		c := openStateless(t, s, `{}`)
		if !passthrough(c) {
			return false
		}
		second = toolText(callTool(t, c, "pid", `{}`))
		return second != first
	})
	if _, err := strconv.Atoi(second); err != nil {
		t.Errorf("pid tool answered %q", second)
	}
	sh := s.(*shared)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.sessionsOnly != nil {
		t.Errorf("fell back after a crash of a server probed before: %v", sh.sessionsOnly)
	}
}

// TestStatelessCloseWhileProbing: Close while the second process's probe
// waits for an answer returns promptly, and so does the request waiting
// for the probe.
func TestStatelessCloseWhileProbing(t *testing.T) {
	opts := testkit.FakeOptions{IgnoreDiscover: true, Marker: fmt.Sprintf("probing-%d", time.Now().UnixNano())}
	cfg := fakeServer("probing", opts)
	s, err := New(cfg, "test", testLogger(t)) // probe bound: the 5s default
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`))
		if c.Conn != nil {
			c.Close()
		}
		done <- err
	}()
	testkit.WaitFor(t, "the second process", func() bool { return len(testkit.Procs(opts.Marker)) == 2 })
	// A Close that waited for the probe would wait for its 5 s bound.
	start := time.Now()
	s.Close()
	if d := time.Since(start); d >= 5*time.Second {
		t.Errorf("Close took %v during a probe", d)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("OpenStateless still waiting after Close")
	}
	if left := testkit.WaitProcsGone(opts.Marker, 5*time.Second); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// TestStatelessProtocolSettings: "2026-07-28" starts the stateless
// requests' process with the server, and no sessions' process (sessions
// take the reverse bridge), and refuses stateless requests with the
// probe's verdict when it is not such a server; "legacy" never starts it.
func TestStatelessProtocolSettings(t *testing.T) {
	t.Run("2026-07-28", func(t *testing.T) {
		s, marker := newMarked(t, "forced", testkit.FakeOptions{}, config.ProtocolModern)
		testkit.WaitFor(t, "the process at start", func() bool { return len(testkit.Procs(marker)) == 1 })
		if c, err := s.Open(context.Background(), newRecorder()); err != nil {
			t.Fatal(err)
		} else if fmt.Sprintf("%T", c) != "*eras.reverseConn" {
			t.Errorf("a session pinned to 2026-07-28 is a %T, want the reverse bridge", c)
		} else {
			c.Close()
		}
		_, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`))
		if !errors.Is(err, mux.ErrNotModern) || !strings.Contains(err.Error(), "-32601") || !strings.Contains(err.Error(), `"protocol"`) {
			t.Errorf("OpenStateless: %v; want the probe's verdict and the setting", err)
		}
	})
	t.Run("legacy", func(t *testing.T) {
		s, marker := newMarked(t, "never", testkit.FakeOptions{Modern: true}, config.ProtocolLegacy)
		if c := openStateless(t, s, `{}`); passthrough(c) {
			t.Error("passed through with protocol legacy")
		}
		if n := len(testkit.Procs(marker)); n != 1 {
			t.Errorf("%d processes, want 1", n)
		}
	})
}

// everythingServer returns the Go SDK conformance server scripts/peers.sh
// installs, skipping the test when it is absent (failing under CI).
func everythingServer(t *testing.T) *config.Server {
	t.Helper()
	path, err := filepath.Abs("../../.cache/bin/everything-server")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing: run scripts/peers.sh", path)
		}
		t.Skipf("%s missing: run scripts/peers.sh", path)
	}
	cfg := testServer("everything")
	cfg.Command = path
	return cfg
}

// TestStatelessGoSDKServer: the Go SDK's dual-era server gets stateless
// requests natively: its own input_required result reaches the client
// untouched, and two listens with the same id each get their own
// acknowledgement, tagged with the client's id.
func TestStatelessGoSDKServer(t *testing.T) {
	s, err := New(everythingServer(t), "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := openStateless(t, s, `{"elicitation":{}}`)
	if !passthrough(c) {
		t.Fatal("the Go SDK server is not passed through")
	}
	out := newRecorder()
	msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"test_input_required_result_elicitation","arguments":{},`+modernMeta+`}}`, `{"elicitation":{}}`))
	c.Handle(context.Background(), &msg, out)
	if r := out.reply(t); !strings.Contains(r, `"id":"x"`) || !strings.Contains(r, `"resultType":"input_required"`) || !strings.Contains(r, `"inputRequests":{"user_name":`) {
		t.Errorf("reply %s: want the server's own input_required", r)
	}

	listen := func(filter string) *recorder {
		c := openStateless(t, s, `{}`)
		out := newRecorder()
		msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":%s,`+modernMeta+`}}`, filter, "{}"))
		c.Handle(context.Background(), &msg, out)
		return out
	}
	a, b := listen(`{"toolsListChanged":true}`), listen(`{"promptsListChanged":true}`)
	for name, tt := range map[string]struct {
		r         *recorder
		want, not string
	}{"A": {a, "toolsListChanged", "promptsListChanged"}, "B": {b, "promptsListChanged", "toolsListChanged"}} {
		var ack string
		tt.r.wait(t, name+"'s acknowledgement", func(sends, _ []string) bool {
			if len(sends) > 0 {
				ack = sends[0]
			}
			return len(sends) > 0
		})
		if !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":"L"`) || !strings.Contains(ack, tt.want) || strings.Contains(ack, tt.not) {
			t.Errorf("%s's acknowledgement %s: want its own filter (%s) tagged with its own id", name, ack, tt.want)
		}
	}
	testkit.WaitFor(t, "two listens pending", func() bool { return s.Pending() == 2 })
}
