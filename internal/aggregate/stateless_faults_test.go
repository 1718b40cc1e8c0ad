package aggregate

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attacks on the endpoint's stateless (2026-07-28) path and on many short
// sessions; helpers are in helpers_faults_test.go and lifecycle_faults_test.go.

// TestFaultStatelessRacingClose: requests of the stateless revision (a
// session per request, initialized by the endpoint) opened while the
// endpoint closes: each OpenStateless returns in time, each request made
// on a connection is answered exactly once, and nothing is left.
func TestFaultStatelessRacingClose(t *testing.T) {
	a := withStateless(t, fakeMember(t, "a", testkit.FakeOptions{}))
	b := withStateless(t, fakeMember(t, "b", testkit.FakeOptions{}))
	e0 := newEndpoint(t, Options{}, a, b)
	// Warm: the members' stateless processes are up.
	{
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		sc, err := e0.OpenStateless(ctx, newStream(), "2026-07-28", []byte(`{}`))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		cl := &client{t: t, conn: sc}
		if got := text(t, cl.callTool(1, "b__echo", `{"message":"warm"}`)); got != "warm" {
			t.Fatalf("stateless call: %q", got)
		}
		sc.Close()
	}
	for iter := range 10 {
		ep, err := New(Options{Name: "stateless", Logger: e0.opts.Logger}, []Member{a, b})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var answered, refused atomic.Int64
		for n := range 8 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), wait)
				defer cancel()
				start := time.Now()
				sc, err := ep.OpenStateless(ctx, newStream(), "2026-07-28", []byte(`{"sampling":{}}`))
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("OpenStateless took %v", d)
				}
				if err != nil {
					refused.Add(1)
					return
				}
				defer sc.Close()
				out := newStream()
				m, _ := jsonrpc.Parse([]byte(toolCall(strconv.Itoa(n), []string{"a__echo", "b__echo"}[n%2], `{"message":"m"}`)))
				sc.Handle(ctx, &m, out)
				select {
				case r := <-out.replied:
					if !strings.HasPrefix(string(r), `{"jsonrpc":"2.0","id":`+strconv.Itoa(n)+`,`) {
						t.Errorf("stateless call: %s", r)
					}
					answered.Add(1)
				case <-time.After(wait):
					t.Errorf("iteration %d: stateless call %d: no reply", iter, n)
				}
			})
		}
		wg.Go(func() {
			switch iter % 3 {
			case 0:
				for range rand.IntN(20000) {
					runtime.Gosched()
				}
			case 1: // some requests answered, others under way
				until(func() bool { return answered.Load() >= 2 })
			case 2: // some connections open
				until(func() bool { return ep.Pending() > 0 || answered.Load() > 0 })
			}
			ep.Close()
		})
		wg.Wait()
		t.Logf("iteration %d: %d answered, %d refused", iter, answered.Load(), refused.Load())
		if _, err := ep.OpenStateless(t.Context(), newStream(), "2026-07-28", nil); err == nil {
			t.Errorf("OpenStateless after Close succeeded")
		}
		testkit.WaitFor(t, "nothing pending", func() bool { return ep.Pending() == 0 })
	}
}

// TestFaultStatelessCriticalMemberDown: a stateless request to an endpoint
// whose critical member cannot start fails at once naming it; with the
// member not critical, the request is served by the others and a call to
// the member down says so.
func TestFaultStatelessCriticalMemberDown(t *testing.T) {
	g := config.Defaults()
	cfg := g.NewServer("broken")
	cfg.Command = "mcpgate-test-no-such-command"
	log, _ := newLog(t)
	srv, err := servers.New(cfg, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	a := withStateless(t, fakeMember(t, "a", testkit.FakeOptions{}))
	for _, critical := range []bool{true, false} {
		broken := withStateless(t, Member{Name: "broken", Prefix: "broken", Backend: srv, Critical: critical})
		if r, ok := srv.(interface{ Ready() (bool, string) }); ok {
			broken.State = r.Ready
		}
		e := newEndpoint(t, Options{}, a, broken)
		for range 3 {
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			start := time.Now()
			sc, err := e.OpenStateless(ctx, newStream(), "2026-07-28", nil)
			cancel()
			d := time.Since(start)
			if d > 5*time.Second {
				t.Errorf("critical=%v: OpenStateless took %v", critical, d)
			}
			if critical {
				if err == nil {
					sc.Close()
					t.Fatal("OpenStateless with a critical member down succeeded")
				}
				if !strings.Contains(err.Error(), `"broken"`) {
					t.Errorf("OpenStateless with a critical member down: %v, want it named", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("OpenStateless with a member down (not critical): %v", err)
			}
			cl := &client{t: t, conn: sc}
			if got := text(t, cl.callTool(1, "a__echo", `{"message":"ok"}`)); got != "ok" {
				t.Errorf("a__echo: %q", got)
			}
			if got := text(t, cl.callTool(2, "broken__x", `{}`)); !strings.Contains(got, `server "broken" is not available`) {
				t.Errorf("broken__x: %q", got)
			}
			sc.Close()
		}
		testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
	}
}

// TestFaultThousandShortSessions: 1,000 sessions opened, initialized, used
// (a call to each member, names loaded) and closed, and 200 stateless
// requests: goroutines and heap back near where they were after the
// first 100, no session or request left.
func TestFaultThousandShortSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	a := withStateless(t, fakeMember(t, "a", testkit.FakeOptions{}))
	b := withStateless(t, fakeMember(t, "b", testkit.FakeOptions{}))
	e := newEndpoint(t, Options{}, a, b)
	one := func(n int) {
		general := newStream()
		conn, err := e.Open(t.Context(), general)
		if err != nil {
			t.Fatal(err)
		}
		cl := &client{t: t, conn: conn, general: general}
		cl.result(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
		for _, m := range []string{"a", "b"} {
			if got := text(t, cl.callTool(n, m+"__echo", `{"message":"x"}`)); got != "x" {
				t.Fatalf("session %d: %s__echo: %q", n, m, got)
			}
		}
		conn.Close()
	}
	stateless := func(n int) {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		sc, err := e.OpenStateless(ctx, newStream(), "2026-07-28", nil)
		if err != nil {
			t.Fatal(err)
		}
		cl := &client{t: t, conn: sc}
		if got := text(t, cl.callTool(n, "a__echo", `{"message":"s"}`)); got != "s" {
			t.Fatalf("stateless %d: %q", n, got)
		}
		sc.Close()
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for n := range 100 {
		one(n)
	}
	for n := range 20 {
		stateless(n)
	}
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
	g0 := testkit.SettleGoroutines(t, "warm", runtime.NumGoroutine(), nil)
	h0 := heap()
	for n := range 1000 {
		one(n)
		if n%5 == 0 {
			stateless(n)
		}
	}
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
	g1 := testkit.SettleGoroutines(t, "after 1,000 sessions", g0+5, nil)
	h1 := heap()
	t.Logf("goroutines %d -> %d, heap %d KiB -> %d KiB", g0, g1, h0>>10, h1>>10)
	if h1 > h0+8<<20 {
		t.Errorf("heap grew from %d KiB to %d KiB over 1,000 sessions", h0>>10, h1>>10)
	}
	e.mu.Lock()
	left := len(e.sessions)
	e.mu.Unlock()
	if left != 0 {
		t.Errorf("%d sessions left", left)
	}
}

// TestFaultStatelessMemberSessionProcessDown: a member whose sessions'
// process is down (killed, held down) while the process serving its
// stateless requests lives: a stateless request still sees and calls it
// (its own connection answered), while a session of the older eras has it
// hidden.
func TestFaultStatelessMemberSessionProcessDown(t *testing.T) {
	ma, down := marker(t, "a"), filepath.Join(t.TempDir(), "down")
	a := withStateless(t, fakeMember(t, "a", testkit.FakeOptions{Marker: ma, Catalog: testkit.CatalogOptions{DownFile: down}}))
	b := withStateless(t, fakeMember(t, "b", testkit.FakeOptions{}))
	if a.State == nil {
		t.Skip("the backend does not report its readiness")
	}
	e := newEndpoint(t, Options{PollInterval: 5 * time.Millisecond}, a, b)
	cl := connect(t, e, `{}`)
	sessionPID := text(t, cl.callTool(1, "a__pid", `{}`))
	stateless := func(what string) *client {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		sc, err := e.OpenStateless(ctx, newStream(), "2026-07-28", nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Cleanup(sc.Close)
		return &client{t: t, conn: sc}
	}
	if pid := text(t, stateless("first").callTool(2, "a__pid", `{}`)); pid == sessionPID {
		t.Skipf("a's stateless requests are served by its sessions' process (%s)", pid)
	}
	release := hold(t, down)
	defer release()
	pid, _ := strconv.Atoi(sessionPID)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a's sessions' process seen down", func() bool { return !e.state(0).ready })
	if got := text(t, cl.callTool(3, "a__echo", `{"message":"x"}`)); !strings.Contains(got, `server "a" is not available`) {
		t.Errorf("session: a__echo while its process is down: %q", got)
	}
	sc := stateless("with a's sessions' process down")
	if got := text(t, sc.callTool(4, "a__echo", `{"message":"served"}`)); got != "served" {
		t.Errorf("stateless: a__echo: %q, want it served by a's stateless process", got)
	}
	if names := sc.tools(); !slices.Contains(names, "a__echo") {
		t.Errorf("stateless: tools %v, want a's", names)
	}
}
