package servers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// These tests run a shared server with "processes" above 1 (sessionpool.go)
// against the testkit fake: its processes are real child processes, and a
// process is told apart by the fake's pid tool.

// newPool starts a shared fake server of n processes with protocol
// protocol. Its cleanup closes it and fails the test if any of its
// processes outlives Close (goroutines: TestMain's goleak).
func newPool(t *testing.T, n int, protocol string) (*shared, string) {
	t.Helper()
	opts := testkit.FakeOptions{Marker: fmt.Sprintf("pool-%d", time.Now().UnixNano()), Modern: protocol == config.ProtocolModern}
	cfg := fakeServer("pool", opts)
	cfg.Processes = n
	cfg.Protocol = protocol
	if err := (&config.Config{Gateway: config.Defaults(), Servers: map[string]*config.Server{"pool": cfg}}).Validate(); err != nil {
		t.Fatalf("config: %v", err)
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
	return s.(*shared), opts.Marker
}

// poolPIDs returns the PIDs of the pool's processes, in pool order.
func poolPIDs(s *shared) []string {
	var pids []string
	for _, p := range s.sessionsProcs() {
		pids = append(pids, strconv.Itoa(pidOf(p)))
	}
	return pids
}

// poolSession opens a session on s, initializes it declaring caps (a JSON
// object) and returns it with the PID of the process it is pinned to.
func poolSession(t *testing.T, s Server, caps string) (conn.Conn, string) {
	t.Helper()
	return poolSessionWith(t, s, caps, newStream())
}

// poolSessionWith is poolSession with general as the session's stream
// for messages not tied to a request.
func poolSessionWith(t *testing.T, s Server, caps string, general conn.Stream) (conn.Conn, string) {
	t.Helper()
	c, err := s.Open(context.Background(), general)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(c.Close)
	out := newStream()
	handle(t, c, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`, out)
	if reply := string(out.next(t)); !strings.Contains(reply, `"result"`) {
		t.Fatalf("initialize: %s", reply)
	}
	return c, sessionPID(t, c)
}

// sessionCall sends a tools/call of tool on session c and returns its reply.
func sessionCall(t *testing.T, c conn.Conn, tool, args string) string {
	t.Helper()
	out := newStream()
	handle(t, c, fmt.Sprintf(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args), out)
	return string(out.next(t))
}

// sessionPID is the PID of the process session c's calls reach.
func sessionPID(t *testing.T, c conn.Conn) string {
	t.Helper()
	pid := toolText(sessionCall(t, c, "pid", `{}`))
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("the pid tool answered %q", pid)
	}
	return pid
}

// startSlow sends a slow call on c that stays in flight until c closes;
// its reply goes to the stream returned.
func startSlow(t *testing.T, c conn.Conn) *stream {
	t.Helper()
	out := newStream()
	handle(t, c, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow","arguments":{"ms":600000}}}`, out)
	return out
}

// TestPoolPinsSessionsLeastLoaded: with three processes, three sessions
// get a process each (the fewest sessions pinned); every call of a session
// reaches its process; a fourth session goes, among processes with one
// session each, to the one with no request in flight; Info shows each
// process with its sessions.
func TestPoolPinsSessionsLeastLoaded(t *testing.T) {
	s, marker := newPool(t, 3, config.ProtocolSessions)
	testkit.WaitFor(t, "three processes", func() bool { return len(testkit.Procs(marker)) == 3 })
	pool := poolPIDs(s)
	var sessions []conn.Conn
	var pids []string
	for range 3 {
		c, pid := poolSession(t, s, `{}`)
		sessions, pids = append(sessions, c), append(pids, pid)
	}
	if got := slices.Sorted(slices.Values(pids)); !slices.Equal(got, slices.Sorted(slices.Values(pool))) {
		t.Fatalf("sessions on processes %v, want one on each of %v", pids, pool)
	}
	for i, c := range sessions {
		for range 5 {
			if pid := sessionPID(t, c); pid != pids[i] {
				t.Fatalf("session %d moved from process %s to %s", i, pids[i], pid)
			}
		}
	}
	// Requests in flight on the first two sessions' processes.
	startSlow(t, sessions[0])
	startSlow(t, sessions[1])
	testkit.WaitFor(t, "two calls in flight", func() bool { return s.Pending() == 2 })
	_, pid := poolSession(t, s, `{}`)
	if pid != pids[2] {
		t.Errorf("the fourth session went to process %s, want %s (no request in flight; the others have one each)", pid, pids[2])
	}
	in := s.Info()
	if len(in.Pool) != 3 {
		t.Fatalf("Info.Pool has %d processes, want 3", len(in.Pool))
	}
	for i, p := range in.Pool {
		want := 1
		if strconv.Itoa(p.PID) == pids[2] {
			want = 2
		}
		if p.Sessions != want || strconv.Itoa(p.PID) != pool[i] || p.State != "ready" {
			t.Errorf("Info.Pool[%d] = %+v, want pid %s, %d sessions, ready", i, p, pool[i], want)
		}
	}
	// A session's end unpins it.
	sessions[0].Close()
	testkit.WaitFor(t, "the closed session uncounted", func() bool {
		n := 0
		for _, p := range s.Info().Pool {
			n += p.Sessions
		}
		return n == 3
	})
}

// TestPoolCapableSessionsApart: sessions that declared sampling are placed
// apart from each other (and from plain sessions while they can be): each
// sampling request the server sends during two concurrent calls reaches
// the session whose call caused it. With one process the second would be
// refused (two sessions in flight there).
func TestPoolCapableSessionsApart(t *testing.T) {
	s, _ := newPool(t, 2, config.ProtocolSessions)
	_, plain := poolSession(t, s, `{}`)
	c1, pid1 := poolSession(t, s, `{"sampling":{}}`)
	c2, pid2 := poolSession(t, s, `{"sampling":{}}`)
	if pid1 == plain {
		t.Errorf("the first sampling session joined the plain session's process %s while another was free", plain)
	}
	if pid1 == pid2 {
		t.Fatalf("both sampling sessions on process %s", pid1)
	}
	var wg sync.WaitGroup
	for i, c := range []conn.Conn{c1, c2} {
		wg.Go(func() {
			out := newRecorder()
			msg, err := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"from %d"}}}`, i))
			if err != nil {
				t.Error(err)
				return
			}
			c.Handle(context.Background(), &msg, out)
			p := &parked{c: conn.NewStatelessConn(c, nil, false), out: out}
			out.wait(t, "the sampling request", func(sends, replies []string) bool {
				for _, raw := range sends {
					if m, err := jsonrpc.Parse([]byte(raw)); err == nil && m.MethodIs("sampling/createMessage") {
						p.gid = string(m.Bytes(m.ID))
						return true
					}
				}
				return len(replies) > 0
			})
			if p.gid == "" {
				t.Errorf("session %d: answered without a sampling request: %v", i, out.replies)
				return
			}
			want := fmt.Sprintf("answer of session %d", i)
			if got := resultText(p.answer(t, want)); got != want {
				t.Errorf("session %d: the call returned %q, want %q", i, got, want)
			}
		})
	}
	wg.Wait()
	if n := s.Counters().Mux.Unroutable; n != 0 {
		t.Errorf("%d server requests refused as unroutable", n)
	}
}

// TestPoolCrashOfOneProcess: kill -9 of one process fails only its own
// calls; the other process's session calls on with no error, during and
// after; the killed process is restarted by its supervisor, and its
// session carries on with the new process.
func TestPoolCrashOfOneProcess(t *testing.T) {
	s, _ := newPool(t, 2, config.ProtocolSessions)
	victim, vpid := poolSession(t, s, `{}`)
	other, opid := poolSession(t, s, `{}`)
	if vpid == opid {
		t.Fatalf("both sessions on process %s", vpid)
	}
	slow := startSlow(t, victim)
	testkit.WaitFor(t, "the victim's call in flight", func() bool { return s.Pending() == 1 })

	stop := make(chan struct{})
	var calls, failures int
	var failed []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				if i > 0 {
					return
				}
			default:
			}
			out := newStream()
			handle(t, other, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m%d"}}}`, i, i), out)
			calls++
			reply := "no reply within 30s"
			select {
			case <-out.got:
				out.mu.Lock()
				reply = string(out.replies[0])
				out.mu.Unlock()
			case <-time.After(30 * time.Second):
			}
			if toolText(reply) != fmt.Sprintf("m%d", i) {
				failures++
				failed = append(failed, reply)
			}
		}
	}()
	pid, _ := strconv.Atoi(vpid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if reply := string(slow.next(t)); !strings.Contains(reply, `"error"`) {
		t.Errorf("the killed process's call got %s, want an error", reply)
	}
	testkit.WaitFor(t, "the killed process restarted", func() bool {
		for _, p := range s.Info().Pool {
			if p.Restarts > 0 && p.State == "ready" && strconv.Itoa(p.PID) != vpid {
				return true
			}
		}
		return false
	})
	close(stop)
	<-done
	if failures > 0 || calls == 0 {
		t.Errorf("the other process's session: %d of %d calls failed: %v", failures, calls, failed)
	}
	if pid := sessionPID(t, other); pid != opid {
		t.Errorf("the other session moved from %s to %s", opid, pid)
	}
	if pid := sessionPID(t, victim); pid == vpid || !slices.Contains(poolPIDs(s), pid) {
		t.Errorf("the victim's session is served by %s after the restart (killed: %s, pool: %v)", pid, vpid, poolPIDs(s))
	}
	for _, p := range s.Info().Pool {
		if strconv.Itoa(p.PID) == opid && p.Restarts != 0 {
			t.Errorf("the other process was restarted %d times", p.Restarts)
		}
	}
}

// TestPoolStatelessFewestInFlight: a 2026-07-28 server's stateless
// requests go to the process of "processes" with the fewest in flight.
func TestPoolStatelessFewestInFlight(t *testing.T) {
	s, marker := newPool(t, 2, config.ProtocolModern)
	testkit.WaitFor(t, "two processes", func() bool { return len(testkit.Procs(marker)) == 2 })
	slow := openStateless(t, s, `{}`)
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":600000},` + fmt.Sprintf(modernMeta, "{}") + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	slow.Handle(context.Background(), &msg, newRecorder())
	testkit.WaitFor(t, "the slow call in flight", func() bool { return s.Pending() == 1 })
	s.mu.Lock()
	procs := slices.Clone(s.modern)
	s.mu.Unlock()
	busy := ""
	for _, p := range procs {
		if p.m.Pending() == 1 {
			busy = strconv.Itoa(pidOf(p))
		}
	}
	for i := range 4 {
		pid := toolText(callTool(t, openStateless(t, s, `{}`), "pid", `{}`))
		if pid == busy || pid == "" {
			t.Errorf("stateless request %d went to process %q; %s has a request in flight", i, pid, busy)
		}
	}
}

// TestPoolTranslatedStatelessSpread: a shared server of the session eras
// translates stateless requests for processes of their own; with
// "processes" 2 a second one is started when the first has a request in
// flight, and requests go to the one without.
func TestPoolTranslatedStatelessSpread(t *testing.T) {
	s, _ := newPool(t, 2, config.ProtocolSessions)
	first := openStateless(t, s, `{}`)
	pid1 := toolText(callTool(t, first, "pid", `{}`)) // first stays bound to its process until closed
	second := openStateless(t, s, `{}`)
	pid2 := toolText(callTool(t, second, "pid", `{}`))
	if pid1 == pid2 || pid1 == "" {
		t.Errorf("two stateless requests at once on process %q, want two processes", pid1)
	}
	first.Close()
	if pid := toolText(callTool(t, openStateless(t, s, `{}`), "pid", `{}`)); pid != pid1 {
		t.Errorf("a request went to %s, want %s, which has none in flight", pid, pid1)
	}
	s.trans.mu.Lock()
	n := len(s.trans.procs)
	s.trans.mu.Unlock()
	if n != 2 {
		t.Errorf("%d translation processes, want 2", n)
	}
}

// TestPoolNotificationsPerProcess: a session hears its own process only.
// One list_changed of a process reaches each session pinned to it once,
// and no session of another process; a logging level a session sets is
// its process's, not the others'.
func TestPoolNotificationsPerProcess(t *testing.T) {
	s, _ := newPool(t, 2, config.ProtocolSessions)
	ga, gb := newRecorder(), newRecorder()
	a, pa := poolSessionWith(t, s, `{}`, ga)
	b, pb := poolSessionWith(t, s, `{}`, gb)
	if pa == pb {
		t.Fatalf("both sessions on process %s", pa)
	}
	if got := toolText(sessionCall(t, a, "list_changed", `{}`)); got != "ok" {
		t.Fatalf("list_changed: %q", got)
	}
	count := func(r *recorder) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, m := range r.sends {
			if strings.Contains(m, "notifications/tools/list_changed") {
				n++
			}
		}
		return n
	}
	// The broadcast precedes the tool's reply on the process's stdout,
	// and the reader delivers it before it reads the reply.
	if n := count(ga); n != 1 {
		t.Errorf("the changing process's session got %d list_changed, want 1", n)
	}
	if n := count(gb); n != 0 {
		t.Errorf("the other process's session got %d list_changed, want 0", n)
	}

	// A subscription is its process's: a's process tells a; b's process
	// changing the same URI tells nobody (b did not subscribe, and a's
	// process did not change it).
	out := newStream()
	handle(t, a, `{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"file:///x"}}`, out)
	if reply := string(out.next(t)); !strings.Contains(reply, `"result"`) {
		t.Fatalf("subscribe: %s", reply)
	}
	updated := func(r *recorder) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, m := range r.sends {
			if strings.Contains(m, "notifications/resources/updated") {
				n++
			}
		}
		return n
	}
	sessionCall(t, b, "touch", `{"uri":"file:///x"}`)
	sessionCall(t, a, "touch", `{"uri":"file:///x"}`)
	if na, nb := updated(ga), updated(gb); na != 1 || nb != 0 {
		t.Errorf("resources/updated: %d to the subscriber, %d to the other process's session; want 1 and 0", na, nb)
	}

	handle(t, a, `{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"debug"}}`, out)
	if reply := string(out.next(t)); !strings.Contains(reply, `"result"`) {
		t.Fatalf("setLevel: %s", reply)
	}
	if got := toolText(sessionCall(t, a, "level", `{}`)); got != "debug" {
		t.Errorf("the level on a's process is %q, want debug", got)
	}
	if got := toolText(sessionCall(t, b, "level", `{}`)); got == "debug" {
		t.Errorf("b's process got a's level %q", got)
	}
	handle(t, b, `{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"error"}}`, out)
	if reply := string(out.next(t)); !strings.Contains(reply, `"result"`) {
		t.Fatalf("setLevel: %s", reply)
	}
	if a, b := toolText(sessionCall(t, a, "level", `{}`)), toolText(sessionCall(t, b, "level", `{}`)); a != "debug" || b != "error" {
		t.Errorf("levels after b's setLevel error: a's process %q, b's %q; want debug and error", a, b)
	}
}

// TestPoolRestartAndReady: the admin's Restart restarts every process of
// the pool; the server is ready while one of its processes is.
func TestPoolRestartAndReady(t *testing.T) {
	s, _ := newPool(t, 2, config.ProtocolSessions)
	testkit.WaitFor(t, "both processes ready", func() bool {
		in := s.Info()
		return len(in.Pool) == 2 && in.Pool[0].State == "ready" && in.Pool[1].State == "ready"
	})
	before := poolPIDs(s)
	if err := s.Restart("test"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "both processes restarted and ready", func() bool {
		in := s.Info()
		return in.Pool[0].Restarts == 1 && in.Pool[1].Restarts == 1 && in.Pool[0].State == "ready" && in.Pool[1].State == "ready"
	})
	if after := poolPIDs(s); after[0] == before[0] || after[1] == before[1] {
		t.Errorf("pids %v after the restart, %v before", after, before)
	}
	// One process down (killed, backing off or starting again): still
	// ready while the other is.
	pid, _ := strconv.Atoi(poolPIDs(s)[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the killed process seen down", func() bool {
		return s.Info().Pool[0].State != "ready" || s.Info().Pool[0].Restarts == 2
	})
	if ready, text := s.Ready(); !ready {
		t.Errorf("Ready with one of two processes up: %v %q", ready, text)
	}
}
