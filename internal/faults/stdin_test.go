package faults

import (
	"fmt"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// batchOfEchoes is a 2025-03-26 batch of n echo calls with ids first..,
// each carrying pad bytes so that the stdin pipe fills quickly.
func batchOfEchoes(first, n, pad int) string {
	msg := strings.Repeat("p", pad)
	parts := make([]string, n)
	for i := range n {
		parts[i] = callBody(fmt.Sprint(first+i), "echo", map[string]string{"message": msg}, "")
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// checkBatchAnswered checks that every request of a batch got exactly one
// response.
func checkBatchAnswered(t *testing.T, what string, r *reply, err error, first, n int) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	missing := 0
	for i := range n {
		if answeredOnce(r, nil, fmt.Sprint(first+i)) != nil {
			if missing++; missing <= 3 {
				t.Errorf("%s: %v", what, answeredOnce(r, nil, fmt.Sprint(first+i)))
			}
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d of %d requests not answered exactly once (status %d, %d messages)", what, missing, n, r.Status, len(r.Msgs))
	}
}

// TestFault1_ServerStopsReadingStdin: a server that stops reading stdin
// after initialize, with more requests queued than its queue holds. Its
// requests still time out (every one answered within timeout + stdinTimeout
// + slack), another server stays fast, idle sessions of a third server
// still expire, and shutdown with requests stuck in the queue finishes
// within its bound.
func TestFault1_ServerStopsReadingStdin(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	mStuck, mOK := marker(t, "stuck"), marker(t, "ok")
	stuck := chaosServer("stuck", testkit.ChaosOptions{Marker: mStuck, Journal: journal, StopReadingAfter: 1, IgnoreSIGTERM: true})
	stuck.Timeout = 2 * time.Second
	stuck.StdinTimeout = 3 * time.Second
	cfg := newConfig(stuck, fakeServer("ok", testkit.FakeOptions{Marker: mOK}), fakeServer("other", testkit.FakeOptions{Marker: mOK}))
	cfg.Gateway.SessionIdleTimeout = 1500 * time.Millisecond
	g := startGateway(t, cfg)

	testkit.WaitFor(t, "the stuck server to stop reading", func() bool { return len(testkit.JournalLines(journal, "stopped-reading")) > 0 })
	// Connected only now: a session left idle for SessionIdleTimeout
	// expires, and on a busy machine the wait above may take longer.
	healthy := g.client("ok")
	healthy.connect(t)
	idle := g.client("other")
	idle.connect(t)
	flooder := g.client("stuck")
	flooder.version = "2025-03-26"
	flooder.connect(t)

	// More than the 1,024-slot queue plus the pipe: a shared server's pipe
	// holds 1 MiB (backend's sharedPipeBytes), so 1,200 messages of about
	// 2.1 KB (2.5 MB) fill both.
	const n, pad = 1200, 2048
	bound := stuck.Timeout + stuck.StdinTimeout + 5*time.Second
	healthyDuring(t, healthy, func() {
		var wg sync.WaitGroup
		wg.Go(func() {
			r, err := flooder.post(batchOfEchoes(1, n, pad))
			checkBatchAnswered(t, "batch to the stuck server", r, err, 1, n)
			if err == nil {
				t.Logf("batch to the stuck server answered in %v", r.Elapsed)
			}
			if err == nil && r.Elapsed > bound {
				t.Errorf("batch to the stuck server answered after %v, want within %v", r.Elapsed, bound)
			}
		})
		// Single requests of another session meanwhile: each answered
		// (an error) within its bound.
		single := g.client("stuck")
		if err := single.tryConnect(); err != nil {
			t.Errorf("second session on the stuck server: %v", err)
		} else {
			for i := range 20 {
				wg.Go(func() {
					id := fmt.Sprint(5000 + i)
					r, err := single.post(callBody(id, "echo", map[string]string{"message": "x"}, ""))
					if err := answeredOnce(r, err, id); err != nil {
						t.Error(err)
					} else if r.Elapsed > bound {
						t.Errorf("request %s answered after %v, want within %v", id, r.Elapsed, bound)
					}
				})
			}
		}
		// Meanwhile the idle sweeper must still run for every server. The
		// sleep is the idle timeout under test, not a wait for a result:
		// a slow sweeper makes this fail, never pass.
		time.Sleep(cfg.Gateway.SessionIdleTimeout + 10*cfg.Gateway.SessionSweepInterval + time.Second)
		t2 := time.Now()
		r, err := idle.post(callBody("1", "echo", map[string]string{"message": "late"}, ""))
		// Held behind the stuck server, it would wait for that server's
		// request timeout.
		if d := time.Since(t2); d >= stuck.Timeout {
			t.Errorf("request on an expired session took %v", d)
		}
		if err != nil || r.Status != http.StatusNotFound {
			t.Errorf("idle session of another server while one server is stuck: %v status %+v, want 404 (expired)", err, r)
		}
		wg.Wait()
	})

	// Shutdown with a full queue in front of a server that neither reads
	// nor obeys SIGTERM: the batch still gets its answers, and shutdown
	// ends within its bound.
	testkit.WaitFor(t, "the restarted stuck server to stop reading", func() bool { return len(testkit.JournalLines(journal, "stopped-reading")) > 1 })
	late := g.client("stuck")
	late.version = "2025-03-26"
	late.connect(t)
	answered := make(chan struct{})
	// Shutdown starts once the whole batch is written to the gateway's
	// connection: a fixed 500 ms sleep was too short on a busy machine, and
	// shutdown then refused the connection. Whether the batch is still in
	// the queue or being answered, it must get its answers.
	wrote := make(chan struct{})
	var wroteOnce sync.Once
	req := late.request(http.MethodPost, batchOfEchoes(10001, n, pad))
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wroteOnce.Do(func() { close(wrote) }) },
	}))
	go func() {
		defer close(answered)
		r, err := late.do(req, nil)
		checkBatchAnswered(t, "batch in flight at shutdown", r, err, 10001, n)
	}()
	testkit.Receive(t, wrote, "the batch to be written to the gateway")
	t.Logf("shutdown took %v", g.stop())
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Errorf("batch in flight at shutdown not answered 10s after shutdown")
	}
	base.check(t, mStuck, mOK)
}

// TestFault1_PingBurstDeadlock: a single-threaded server sends 20,000 pings
// right after initialize without reading stdin. The gateway must keep
// reading its stdout while the answers wait, so both pipes never deadlock:
// the burst completes and a call afterwards is answered. Another server is
// not held behind the burst: the server pauses halfway (10,000 pings out,
// their answers piled up in front of a stdin it does not read), and calls to
// the healthy server are answered before it goes on.
func TestFault1_PingBurstDeadlock(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	gate := testkit.NewGate(t)
	mBurst, mOK := marker(t, "burst"), marker(t, "ok")
	cfg := newConfig(
		chaosServer("burst", testkit.ChaosOptions{Marker: mBurst, Journal: journal, PingBurst: 20000, PingBurstGate: gate.Path}),
		fakeServer("ok", testkit.FakeOptions{Marker: mOK}),
	)
	g := startGateway(t, cfg)
	healthy := g.client("ok")
	healthy.connect(t)

	healthyDuring(t, healthy, func() {
		c := g.client("burst")
		if err := c.tryConnect(); err != nil {
			t.Errorf("session on the bursting server: %v", err)
			return
		}
		testkit.WaitFor(t, "the ping burst to pause halfway", func() bool {
			return len(testkit.JournalLines(journal, "burst-paused")) > 0
		})
		for i := range minDuring {
			// Ids apart from the probe's, which runs on the same session.
			if _, err := healthy.echo(1_000_000+i, "in the middle of the burst"); err != nil {
				t.Errorf("healthy server in the middle of the ping burst: %v", err)
			}
		}
		if n := len(testkit.JournalLines(journal, "burst-done")); n != 0 {
			t.Errorf("the burst went on past its gate")
		}
		gate.Open(t)
		testkit.WaitFor(t, "the ping burst to be read by the gateway", func() bool {
			return len(testkit.JournalLines(journal, "burst-done")) > 0
		})
		if _, err := c.echo(1, "after the burst"); err != nil {
			t.Errorf("call after the ping burst: %v", err)
		}
	})
	if n := len(testkit.JournalLines(journal, "start ")); n != 1 {
		t.Errorf("the bursting server was started %d times, want 1 (no deadlock, no kill)", n)
	}
	g.stop()
	base.check(t, mBurst, mOK)
}
