package faults

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestFault2_SlowInitializeRecovers: the first process answers initialize
// later than its init timeout (an "npx -y" download on first use). The
// failed handshake is retried on a new process with backoff, and clients
// get the server without a gateway restart; every attempt meanwhile is
// answered promptly.
func TestFault2_SlowInitializeRecovers(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "slow")
	slow := chaosServer("slow", testkit.ChaosOptions{Marker: m, Journal: journal, SlowStarts: 1, InitDelay: 3 * time.Second})
	slow.Timeout = 2 * time.Second
	slow.InitTimeout = 1 * time.Second
	g := startGateway(t, newConfig(slow))

	c := g.client("slow")
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := c.tryConnect()
		if d := time.Since(start); d > slow.Timeout+3*time.Second {
			t.Errorf("attempt %d answered after %v", attempt, d)
		}
		if err == nil {
			t.Logf("connected at attempt %d", attempt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never became usable after a slow first initialize (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.echo(1, "recovered"); err != nil {
		t.Errorf("call after recovery: %v", err)
	}
	if n := len(testkit.JournalLines(journal, "start ")); n < 2 {
		t.Errorf("the server was started %d times, want a restart after the failed initialize", n)
	}
	g.stop()
	base.check(t, m)
}

// TestFault2_InitTimeoutIndependentOfRequestTimeout: a server slower to
// initialize than its per-request timeout, but within initTimeout, is not
// killed for it: clients may be told it is still starting, then it works
// on its first process.
func TestFault2_InitTimeoutIndependentOfRequestTimeout(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "slowinit")
	s := chaosServer("slowinit", testkit.ChaosOptions{Marker: m, Journal: journal, InitDelay: 2 * time.Second})
	s.Timeout = 1 * time.Second
	s.InitTimeout = 10 * time.Second
	g := startGateway(t, newConfig(s))
	c := g.client("slowinit")
	var err error
	testkit.WaitFor(t, "a session on the slowly initializing server", func() bool {
		err = c.tryConnect()
		return err == nil
	})
	if _, err := c.echo(1, "ok"); err != nil {
		t.Error(err)
	}
	if n := len(testkit.JournalLines(journal, "start ")); n != 1 {
		t.Errorf("the server was started %d times, want once: its initialize is bounded by initTimeout, not timeout", n)
	}
	g.stop()
	base.check(t, m)
}

// initError returns the message of the JSON-RPC error answering id 0
// (initialize), or fails.
func initError(t *testing.T, r *reply, err error) string {
	t.Helper()
	if err := answeredOnce(r, err, "0"); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	m := r.answers("0")[0]
	if m.Error == nil {
		t.Fatalf("initialize succeeded (%s), want an error", m.Result)
	}
	return m.Error.Message
}

// TestFault6_MissingCommandDoesNotStopGateway: a Claude Desktop config
// naming a command this machine lacks (uvx without uv) does not stop the
// gateway: the other server is served, and the missing one's clients get an
// immediate error naming the command, with no session id.
func TestFault6_MissingCommandDoesNotStopGateway(t *testing.T) {
	base := takeBaseline()
	m := marker(t, "ok")
	const missing = "mcpgate-fault-no-such-uvx"
	bad := config.Defaults()
	uvx := bad.NewServer("uvx")
	uvx.Command, uvx.Args = missing, []string{"mcp-server-fetch"}
	g := startGateway(t, newConfig(uvx, fakeServer("ok", testkit.FakeOptions{Marker: m})))

	ok := g.client("ok")
	ok.connect(t)
	if _, err := ok.echo(1, "served"); err != nil {
		t.Fatalf("the other server: %v", err)
	}
	for _, mode := range []string{"2025-11-25", "2025-03-26"} {
		c := g.client("uvx")
		c.version = mode
		start := time.Now()
		r, err := c.post(initializeBody(mode))
		msg := initError(t, r, err)
		// At once: not after a timeout (the request's or the first
		// start's), which only a wait for the missing command reaches.
		if d := time.Since(start); d >= min(uvx.Timeout, uvx.InitTimeout) {
			t.Errorf("%s: error after %v, want it at once", mode, d)
		}
		if !strings.Contains(msg, "command not found") || !strings.Contains(msg, missing) {
			t.Errorf("%s: error %q does not name the cause (command not found: %s)", mode, msg, missing)
		}
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			t.Errorf("%s: failed initialize carries Mcp-Session-Id %q", mode, id)
		}
	}
	g.stop()
	base.check(t, m)
}

// TestFault6_CrashAtStartGivesReason: a server that exits at start (a
// missing API key) answers its client at once with an error carrying its
// stderr and exit status, and no session id; in both isolation modes.
func TestFault6_CrashAtStartGivesReason(t *testing.T) {
	for _, iso := range []config.Isolation{config.IsolationShared, config.IsolationSession} {
		t.Run(string(iso), func(t *testing.T) {
			base := takeBaseline()
			m := marker(t, "crash")
			const why = "fatal: FAULT_API_KEY is not set"
			s := chaosServer("crash", testkit.ChaosOptions{Marker: m, ExitAtStart: true, ExitCode: 1, StartupStderr: why})
			s.Isolation = iso
			// Far above what a start takes on a busy machine: an error that
			// waited for a timeout instead of the exit stands out.
			s.Timeout, s.InitTimeout = 30*time.Second, 30*time.Second
			g := startGateway(t, newConfig(s))
			c := g.client("crash")
			start := time.Now()
			r, err := c.post(initializeBody(c.version))
			msg := initError(t, r, err)
			if d := time.Since(start); d >= s.InitTimeout {
				t.Errorf("error after %v, want it before the init timeout %v", d, s.InitTimeout)
			}
			if !strings.Contains(msg, why) || !strings.Contains(msg, "exit status 1") {
				t.Errorf("error %q lacks the server's stderr (%q) or its exit status", msg, why)
			}
			if id := r.Header.Get("Mcp-Session-Id"); id != "" {
				t.Errorf("failed initialize carries Mcp-Session-Id %q", id)
			}
			g.stop()
			base.check(t, m)
		})
	}
}

// TestFault6_CrashMidCallFailsAtOnce: a server that dies after 1.5 s of
// uptime with a call in flight, leaving a grandchild that holds its stdout,
// fails that call at once with its exit status, and the next call works on
// the restarted process; no grandchild survives.
func TestFault6_CrashMidCallFailsAtOnce(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "crashy")
	// The grandchild keeps stdout open after the crash, as npx -> node does.
	s := chaosServer("crashy", testkit.ChaosOptions{Marker: m, Journal: journal, CrashAfter: 1500 * time.Millisecond, SpawnGrandchild: true})
	s.Timeout = 30 * time.Second
	g := startGateway(t, newConfig(s))
	c := g.client("crashy")
	c.connect(t)
	r, err := c.post(callBody("1", "slow", map[string]int{"ms": 60000}, ""))
	if err := answeredOnce(r, err, "1"); err != nil {
		t.Fatal(err)
	}
	// At once: a call that waited past the crash is answered only by the
	// 30 s request timeout.
	if r.Elapsed >= s.Timeout {
		t.Errorf("call in flight at the crash answered after %v, want at once (before the %v request timeout)", r.Elapsed, s.Timeout)
	}
	if e := r.final().Error; e == nil || !strings.Contains(e.Message, "exit status 4") {
		t.Errorf("call in flight at the crash: got %s, want an error naming exit status 4", r.Msgs)
	}
	testkit.WaitFor(t, "a restart", func() bool { return len(testkit.JournalLines(journal, "start ")) >= 2 })
	var lastErr error
	testkit.WaitFor(t, "a call answered by the restarted server", func() bool {
		_, lastErr = c.echo(2, "after the crash")
		return lastErr == nil
	})
	g.stop()
	base.check(t, m)
}

// journalTimes returns the UNIXNANO times of a journal's lines with prefix
// ("start" or "crash"), in order.
func journalTimes(t *testing.T, journal, prefix string) []time.Time {
	var out []time.Time
	for _, l := range testkit.JournalLines(journal, prefix+" ") {
		f := strings.Fields(l)
		ns, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("bad journal line %q", l)
		}
		out = append(out, time.Unix(0, ns))
	}
	return out
}

// TestFault6_CrashLoopBackoffGrows: a server that dies after 1.2 s of
// uptime, serving nothing, is in a crash loop: the wait before each restart
// must grow, not reset because the process lived past 1 s (backoff resets
// only after a served request or 30 s of uptime).
func TestFault6_CrashLoopBackoffGrows(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "loop")
	g := startGateway(t, newConfig(chaosServer("loop", testkit.ChaosOptions{Marker: m, Journal: journal, CrashAfter: 1200 * time.Millisecond})))
	const restarts = 4
	testkit.WaitFor(t, "the crash loop", func() bool { return len(testkit.JournalLines(journal, "start ")) > restarts })
	starts, crashes := journalTimes(t, journal, "start"), journalTimes(t, journal, "crash")
	var gaps []time.Duration
	for i := 0; i < restarts && i < len(crashes) && i+1 < len(starts); i++ {
		gaps = append(gaps, starts[i+1].Sub(crashes[i]))
	}
	t.Logf("waits before restarts: %v", gaps)
	// Equal jitter from 100 ms doubling: the 4th wait is 400-800 ms; with
	// a reset after each 1.2 s life, every wait stays at 50-100 ms.
	if len(gaps) < restarts || slices.Max(gaps) < 350*time.Millisecond {
		t.Errorf("restart waits %v do not grow in a crash loop", gaps)
	}
	g.stop()
	base.check(t, m)
}
