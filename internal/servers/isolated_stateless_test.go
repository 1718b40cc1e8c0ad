package servers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// These tests run the stateless requests of a session-isolated stdio
// server (isolated_stateless.go) against the testkit fake: as a dual-era
// server (served natively) and as a server of the session eras
// (translated), beside sessions that keep a process each.

// newSessionServer starts a session-isolated fake server with protocol
// protocol; tweak, if set, edits its config first. Its cleanup closes it
// and fails the test if any of its processes outlives Close.
func newSessionServer(t *testing.T, opts testkit.FakeOptions, protocol string, tweak func(*config.Server)) (Server, string) {
	t.Helper()
	opts.Marker = fmt.Sprintf("iso-stateless-%d", time.Now().UnixNano())
	cfg := fakeServer("iso", opts)
	cfg.Isolation = config.IsolationSession
	cfg.Protocol = protocol
	if tweak != nil {
		tweak(cfg)
	}
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

// openSession opens and initializes a session and returns it with the
// PID of its process (the fake's pid tool).
func openSession(t *testing.T, s Server) (conn.Conn, string) {
	t.Helper()
	c, err := s.Open(context.Background(), newStream())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(c.Close)
	initialized(t, c)
	out := newStream()
	handle(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pid","arguments":{}}}`, out)
	pid := toolText(string(out.next(t)))
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("the session's pid tool answered %q", pid)
	}
	return c, pid
}

// statelessPID is the PID of the process serving stateless requests.
func statelessPID(t *testing.T, s Server) string {
	t.Helper()
	pid := toolText(callTool(t, openStateless(t, s, `{}`), "pid", `{}`))
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("the stateless pid tool answered %q", pid)
	}
	return pid
}

func procCount(marker string) int { return len(testkit.Procs(marker)) }

// livePIDs returns the PIDs of the processes s gave to sessions.
func livePIDs(s Server) []string {
	iso := s.(*isolatedStdio).isolated
	iso.mu.Lock()
	defer iso.mu.Unlock()
	var pids []string
	for p := range iso.live {
		pids = append(pids, strconv.Itoa(pidOf(p)))
	}
	slices.Sort(pids)
	return pids
}

// checkApart fails the test unless the sessions' pids are the processes s
// gave to sessions, one each, none of them serving stateless requests
// (stateless: pids of those).
func checkApart(t *testing.T, s Server, sessions []string, stateless ...string) {
	t.Helper()
	want := slices.Sorted(slices.Values(sessions))
	if live := livePIDs(s); !slices.Equal(live, want) || len(slices.Compact(slices.Clone(want))) != len(want) {
		t.Errorf("sessions served by %v, sessions' processes %v: want a process of its own per session", sessions, live)
	}
	for _, pid := range stateless {
		if slices.Contains(sessions, pid) {
			t.Errorf("process %s serves stateless requests and a session", pid)
		}
	}
}

// TestSessionStatelessNative: a session-isolated dual-era server answers a
// 2026-07-28 tools/call natively, on a process started for the first
// stateless request that never saw initialize; sessions of the older eras
// still get a process each, apart from it; its requests count in Pending;
// a session's end stops only the session's process.
func TestSessionStatelessNative(t *testing.T) {
	s, marker := newSessionServer(t, testkit.FakeOptions{Modern: true}, config.ProtocolAuto, nil)
	if n := procCount(marker); n != 0 {
		t.Fatalf("%d processes before any request, want 0 (nothing is started ahead)", n)
	}
	c := openStateless(t, s, `{}`)
	if !passthrough(c) {
		t.Fatal("a dual-era server's stateless request is not passed through")
	}
	if got := toolText(callTool(t, c, "initialized", `{}`)); got != "false" {
		t.Errorf("the stateless process saw initialize: %q", got)
	}
	native := statelessPID(t, s)

	a, pidA := openSession(t, s)
	_, pidB := openSession(t, s)
	checkApart(t, s, []string{pidA, pidB}, native)

	slow := newRecorder()
	msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000},`+modernMeta+`}}`, "{}"))
	c.Handle(context.Background(), &msg, slow)
	testkit.WaitFor(t, "the stateless request to count in Pending", func() bool { return s.Pending() == 1 })
	c.Abandon(slow)
	if n := s.Pending(); n != 0 {
		t.Errorf("Pending = %d after Abandon", n)
	}

	a.Close()
	testkit.WaitFor(t, "the ended session's process to stop", func() bool {
		return !slices.Contains(testkit.Procs(marker), mustAtoi(t, pidA))
	})
	checkApart(t, s, []string{pidB}, native)
	if pid := statelessPID(t, s); pid != native {
		t.Errorf("stateless requests moved from process %s to %s when a session ended", native, pid)
	}
}

// TestSessionStatelessTranslated: a session-isolated server of the session
// eras gets its 2026-07-28 tools/call translated, through an initialized
// process of its own, not through a session's.
func TestSessionStatelessTranslated(t *testing.T) {
	s, _ := newSessionServer(t, testkit.FakeOptions{}, config.ProtocolAuto, nil)
	c := openStateless(t, s, `{}`)
	if passthrough(c) {
		t.Fatal("a legacy server's stateless request is passed through")
	}
	if got := toolText(callTool(t, c, "echo", `{"message":"hi"}`)); got != "hi" {
		t.Errorf("echo: %q", got)
	}
	if got := toolText(callTool(t, c, "initialized", `{}`)); got != "true" {
		t.Errorf("translated through a process that was not initialized: %q", got)
	}
	translator := statelessPID(t, s)

	_, pidA := openSession(t, s)
	_, pidB := openSession(t, s)
	checkApart(t, s, []string{pidA, pidB}, translator)
	if pid := statelessPID(t, s); pid != translator {
		t.Errorf("stateless requests moved from process %s to %s when sessions opened", translator, pid)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSessionStatelessProtocolSettings: the "protocol" key works as in
// shared mode: "legacy" translates even for a dual-era server,
// "2026-07-28" starts the stateless process with the server and requires
// the revision, of sessions too (the reverse bridge).
func TestSessionStatelessProtocolSettings(t *testing.T) {
	t.Run("legacy", func(t *testing.T) {
		s, marker := newSessionServer(t, testkit.FakeOptions{Modern: true}, config.ProtocolLegacy, nil)
		if n := procCount(marker); n != 0 {
			t.Fatalf("%d processes before any request, want 0", n)
		}
		c := openStateless(t, s, `{}`)
		if passthrough(c) {
			t.Error("passed through with protocol legacy")
		}
		if got := toolText(callTool(t, c, "initialized", `{}`)); got != "true" {
			t.Errorf("initialized: %q, want a translation through an initialized process", got)
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		s, marker := newSessionServer(t, testkit.FakeOptions{Modern: true}, config.ProtocolModern, nil)
		testkit.WaitFor(t, "the stateless process started with the server", func() bool { return procCount(marker) > 0 })
		c := openStateless(t, s, `{}`)
		if !passthrough(c) {
			t.Fatal("not passed through with protocol 2026-07-28")
		}
		if got := toolText(callTool(t, c, "initialized", `{}`)); got != "false" {
			t.Errorf("initialized: %q, want a process that never saw initialize", got)
		}
	})
	t.Run("2026-07-28 on a legacy server", func(t *testing.T) {
		s, _ := newSessionServer(t, testkit.FakeOptions{}, config.ProtocolModern, nil)
		_, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`))
		if !errors.Is(err, mux.ErrNotModern) {
			t.Errorf("OpenStateless: %v; want the probe's verdict", err)
		}
		// Sessions take the reverse bridge (the server is to speak
		// 2026-07-28, perhaps alone), and are told the same.
		c, err := s.Open(context.Background(), newStream())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		out := newStream()
		handle(t, c, initialize, out)
		if reply := string(out.next(t)); !strings.Contains(reply, "not a 2026-07-28 server") || !strings.Contains(reply, `"error"`) {
			t.Errorf("initialize: %s; want the probe's verdict", reply)
		}
	})
}

// TestSessionStatelessMaxProcesses: the stateless processes are not
// counted against maxProcesses: stateless requests are served while the
// sessions hold every slot, and serving them takes no slot from sessions
// (a session still gets one when another ends; a pool prewarmed up to the
// cap stays whole).
func TestSessionStatelessMaxProcesses(t *testing.T) {
	t.Run("sessions at the cap", func(t *testing.T) {
		s, marker := newSessionServer(t, testkit.FakeOptions{Modern: true}, config.ProtocolAuto, func(c *config.Server) { c.MaxProcesses = 1 })
		a, _ := openSession(t, s)
		if _, err := s.Open(context.Background(), newStream()); !errors.Is(err, ErrTooManyProcesses) {
			t.Fatalf("a second session: %v, want ErrTooManyProcesses", err)
		}
		c := openStateless(t, s, `{}`)
		if got := toolText(callTool(t, c, "echo", `{"message":"over the cap"}`)); got != "over the cap" {
			t.Fatalf("a stateless request with the sessions at the cap: %q", got)
		}
		if n := procCount(marker); n < 2 {
			t.Errorf("%d processes, want the session's and the stateless ones", n)
		}
		if _, err := s.Open(context.Background(), newStream()); !errors.Is(err, ErrTooManyProcesses) {
			t.Errorf("a second session after a stateless request: %v, want ErrTooManyProcesses still", err)
		}
		a.Close()
		var b conn.Conn
		testkit.WaitFor(t, "the freed slot", func() bool {
			var err error
			b, err = s.Open(context.Background(), newStream())
			return err == nil
		})
		defer b.Close()
		initialized(t, b)
		if got := toolText(callTool(t, c, "echo", `{"message":"again"}`)); got != "again" {
			t.Errorf("a stateless request after the slot changed hands: %q", got)
		}
	})
	t.Run("pool at the cap", func(t *testing.T) {
		s, marker := newSessionServer(t, testkit.FakeOptions{Modern: true}, config.ProtocolAuto, func(c *config.Server) { c.MaxProcesses, c.Prewarm = 1, 1 })
		iso := s.(*isolatedStdio).isolated
		testkit.WaitFor(t, "the pooled process", func() bool { return len(pooledPIDs(iso)) == 1 })
		pooled := pooledPIDs(iso)
		if got := toolText(callTool(t, openStateless(t, s, `{}`), "echo", `{"message":"hi"}`)); got != "hi" {
			t.Fatalf("a stateless request with the pool at the cap: %q", got)
		}
		if pids := pooledPIDs(iso); !slices.Equal(pids, pooled) {
			t.Errorf("pool %v after a stateless request, want %v untouched", pids, pooled)
		}
		_, pid := openSession(t, s)
		if strconv.Itoa(pooled[0]) != pid {
			t.Errorf("the session got process %s, want the pooled %d", pid, pooled[0])
		}
		if n := procCount(marker); n < 2 {
			t.Errorf("%d processes, want the session's and the stateless ones", n)
		}
	})
}

// TestSessionStatelessCloseStopsAll: Close stops the sessions' processes
// and the stateless ones (native and translating alike), waits for them,
// and refuses what comes after.
func TestSessionStatelessCloseStopsAll(t *testing.T) {
	for _, opts := range []testkit.FakeOptions{{Modern: true, SpawnGrandchild: true}, {SpawnGrandchild: true}} {
		t.Run(fmt.Sprintf("modern=%v", opts.Modern), func(t *testing.T) {
			opts.Marker = fmt.Sprintf("iso-close-%d", time.Now().UnixNano())
			cfg := fakeServer("iso", opts)
			cfg.Isolation = config.IsolationSession
			s, err := New(cfg, "test", testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			openSession(t, s)
			openSession(t, s)
			c := openStateless(t, s, `{}`)
			if got := toolText(callTool(t, c, "echo", `{"message":"hi"}`)); got != "hi" {
				t.Fatalf("echo: %q", got)
			}
			slow := newRecorder()
			msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000},`+modernMeta+`}}`, "{}"))
			c.Handle(context.Background(), &msg, slow)
			testkit.WaitFor(t, "the slow stateless request upstream", func() bool { return s.Pending() == 1 })
			if n := procCount(opts.Marker); n < 2*2+2 {
				t.Fatalf("%d processes (grandchildren included), want sessions' and stateless ones", n)
			}
			s.Close()
			if reply := slow.reply(t); !strings.Contains(reply, `"error"`) {
				t.Errorf("the request in flight at Close got %s, want an error", reply)
			}
			if left := testkit.WaitProcsGone(opts.Marker, 5*time.Second); len(left) > 0 {
				t.Errorf("processes left after Close: %v", left)
			}
			if _, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`)); !errors.Is(err, errClosed) {
				t.Errorf("OpenStateless after Close: %v, want errClosed", err)
			}
			s.Close() // a second Close returns too
		})
	}
}
