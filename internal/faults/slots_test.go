package faults

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// tryOpen opens a session of server: admitted, or refused with 429 for the
// principal's session limit (no session made); an error otherwise. An
// admitted session holds its stream from the start (never idle until the
// test stops it).
func tryOpen(t *testing.T, g *testGateway, server string) (*client, *watcher, error) {
	t.Helper()
	c := g.client(server)
	r, err := c.post(initializeBody(c.version))
	if err != nil {
		return nil, nil, err
	}
	if r.Status == http.StatusTooManyRequests {
		if r.Header.Get("Retry-After") == "" || r.final().Error == nil {
			return nil, nil, fmt.Errorf("refusal without Retry-After or JSON-RPC error: %+v %s", r.Header, r.Body)
		}
		return nil, nil, nil
	}
	if r.Status != http.StatusOK || r.final().Error != nil {
		return nil, nil, fmt.Errorf("initialize: status %d, %s %s", r.Status, r.Msgs, r.Body)
	}
	c.session = r.Header.Get("Mcp-Session-Id")
	w := watch(t, c)
	if r, err := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || r.Status != http.StatusAccepted {
		return nil, nil, fmt.Errorf("notifications/initialized: %v %+v", err, r)
	}
	return c, w, nil
}

// admitNow opens a session that must be admitted at once.
func admitNow(t *testing.T, g *testGateway, what string) (*client, *watcher) {
	t.Helper()
	c, w, err := tryOpen(t, g, "res")
	if err != nil || c == nil {
		t.Fatalf("%s: a session was refused (%v), want it admitted", what, err)
	}
	return c, w
}

// admitOnce waits until a session is admitted: a slot is freed.
func admitOnce(t *testing.T, g *testGateway, what string) (*client, *watcher) {
	t.Helper()
	var c *client
	var w *watcher
	eventually(t, what, func() (string, bool) {
		var err error
		c, w, err = tryOpen(t, g, "res")
		return fmt.Sprint(err), err == nil && c != nil
	})
	return c, w
}

// refusedNow checks that the principal's sessions are all taken.
func refusedNow(t *testing.T, g *testGateway, what string) {
	t.Helper()
	c, w, err := tryOpen(t, g, "res")
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if c != nil {
		t.Errorf("%s: a session beyond maxSessions was admitted", what)
		w.stop()
		c.del()
	}
}

// openLegacy opens a legacy (2024-11-05) session: its SSE stream, which
// is the session. drop closes the stream.
func openLegacy(t *testing.T, g *testGateway) (drop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/servers/res/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := g.tr.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("legacy session: %v %+v, want it admitted", err, resp)
	}
	if ev, err := sse.NewReader(resp.Body, 0).Next(); err != nil || ev.Event != "endpoint" {
		t.Fatalf("legacy session: first event %+v %v, want endpoint", ev, err)
	}
	return func() {
		cancel()
		resp.Body.Close()
	}
}

// TestBookkeeping_SessionSlotsFreedUnderFaults: with maxSessions 2 (every
// client the one anonymous principal), a session that leaves its store
// frees its slot, whichever way it leaves: DELETE (at once), idle expiry,
// a Streamable HTTP client dropping its connections mid-call (then
// expiry), a legacy client dropping its stream (after the reconnection
// grace), a client dropping its initialize while the server starts. A
// crash and restart of the server ends no session: the slots stay taken.
// DELETEs racing each other and the idle sweeper free each slot once: at
// the end exactly two sessions are admitted again, and a third refused;
// a count gone negative would admit more.
func TestBookkeeping_SessionSlotsFreedUnderFaults(t *testing.T) {
	base := takeBaseline()
	m, mSlow := marker(t, "res"), marker(t, "slow")
	gate := testkit.NewGate(t) // never opened: "slow" never gets ready
	slow := fakeServer("slow", testkit.FakeOptions{Marker: mSlow, StartGate: gate.Path})
	slow.InitTimeout = 2 * testkit.WaitTimeout
	cfg := newConfig(fakeServer("res", testkit.FakeOptions{Marker: m}), slow)
	cfg.Gateway.SessionIdleTimeout = 2 * time.Second
	cfg.Gateway.Limits = &config.Limits{MaxSessions: 2}
	g := startGateway(t, cfg)

	h1, _ := admitNow(t, g, "first session")
	a, wa := admitNow(t, g, "second session")
	refusedNow(t, g, "a third session")

	// DELETE frees the slot before it answers.
	mustDelete(t, a)
	wa.stop()
	_, wb := admitNow(t, g, "a session after a DELETE")
	refusedNow(t, g, "a third session after a DELETE")

	// Idle expiry.
	wb.stop()
	c, wc := admitOnce(t, g, "a session after an idle expiry")
	refusedNow(t, g, "a third session after an idle expiry")

	// A client dropping its stream and a call in flight: the session lives
	// on until it is idle, then expires.
	ctx, drop := context.WithCancel(context.Background())
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		req := c.request(http.MethodPost, callBody("1", "slow", map[string]int{"ms": 600000}, ""))
		_, _ = c.do(req.WithContext(ctx), nil) // dropped: no answer
	}()
	eventually(t, "the dropped call in flight", func() (string, bool) {
		v, err := g.metric("mcpgate_server_pending_requests", `server="res"`)
		return fmt.Sprint(v, err), err == nil && v >= 1
	})
	drop()
	<-dropped
	wc.stop()
	d, wd := admitOnce(t, g, "a session after a client dropped")
	refusedNow(t, g, "a third session after a client dropped")

	// A legacy client dropping its stream.
	mustDelete(t, d)
	wd.stop()
	dropLegacy := openLegacy(t, g)
	refusedNow(t, g, "a third session beside a legacy one")
	dropLegacy()
	e, we := admitOnce(t, g, "a session after a legacy client dropped")
	refusedNow(t, g, "a third session after a legacy client dropped")

	// A client dropping its initialize while the server starts: the
	// session counts while it waits, and not once its client left.
	mustDelete(t, e)
	we.stop()
	ictx, dropInit := context.WithCancel(context.Background())
	initDone := make(chan struct{})
	t.Cleanup(func() { dropInit(); <-initDone }) // before the gateway stops, should the test end early
	go func() {
		defer close(initDone)
		// Refused while a probe below holds the slot: again until it is
		// admitted and waits (or is dropped).
		for ictx.Err() == nil {
			sc := g.client("slow")
			r, err := sc.do(sc.request(http.MethodPost, initializeBody(sc.version)).WithContext(ictx), nil)
			if err == nil && r.Status != http.StatusTooManyRequests {
				t.Errorf("initialize of a server that never starts: status %d %s %s, want it waiting until dropped", r.Status, r.Msgs, r.Body)
				return
			}
			select {
			case <-ictx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	eventually(t, "the waiting initialize to take a slot", func() (string, bool) {
		c, w, err := tryOpen(t, g, "res")
		if c != nil { // not counted yet: give the slot back
			w.stop()
			c.del()
		}
		return fmt.Sprint(c != nil, err), err == nil && c == nil
	})
	dropInit()
	<-initDone
	f, _ := admitOnce(t, g, "a session after a client dropped its initialize")
	refusedNow(t, g, "a third session after a client dropped its initialize")

	// A crash ends no session: after the restart both are served, and the
	// slots are still theirs.
	victim := h1.pidOf(t, 1)
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i, x := range []*client{h1, f} {
		var lastErr error
		eventually(t, "the session served after the restart", func() (string, bool) {
			_, lastErr = x.echo(10+i, "after the crash")
			return fmt.Sprint(lastErr), lastErr == nil
		})
	}
	refusedNow(t, g, "a third session after a crash")

	// DELETEs racing each other and the sweeper, at offsets around the
	// idle timeout (whichever wins, each slot is freed once).
	mustDelete(t, h1)
	mustDelete(t, f)
	for round := range 4 {
		x, wx := admitOnce(t, g, "a session of a racing round")
		y, wy := admitOnce(t, g, "a session of a racing round")
		wx.stop()
		wy.stop()
		time.Sleep(cfg.Gateway.SessionIdleTimeout + time.Duration(round)*cfg.Gateway.SessionSweepInterval/2)
		var wg sync.WaitGroup
		statuses := make([]int, 3)
		for i, z := range []*client{x, x, y} {
			wg.Go(func() { statuses[i], _ = z.del() })
		}
		wg.Wait()
		if statuses[0] == http.StatusNoContent && statuses[1] == http.StatusNoContent {
			t.Errorf("round %d: two DELETEs of one session both got 204", round)
		}
	}
	waitSessions(t, g, "res", 0)
	admitNow(t, g, "the first session after the races")
	admitNow(t, g, "the second session after the races")
	refusedNow(t, g, "a third session after the races")
	g.stop()
	base.check(t, m, mSlow)
}
