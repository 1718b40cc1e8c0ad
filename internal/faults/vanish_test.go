package faults

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// checkUpdates checks how many notifications/resources/updated each
// watcher got for each of uris: want[i][uri], 0 when absent.
func checkUpdates(t *testing.T, names []string, ws []*watcher, want []map[string]int, uris ...string) {
	t.Helper()
	for i, w := range ws {
		for _, uri := range uris {
			if got := w.updates(uri); got != want[i][uri] {
				t.Errorf("session %s got %d updates of %q, want %d", names[i], got, uri, want[i][uri])
			}
		}
	}
}

// touchAll has the server send notifications/resources/updated for each
// of uris and then for "fin", and waits until every watcher got that
// update of "fin" (all of them subscribe to it): a session's stream is in
// order, so what it got of uris is then all it gets.
func touchAll(t *testing.T, c *client, ws []*watcher, uris ...string) {
	t.Helper()
	before := make([]int, len(ws))
	for i, w := range ws {
		before[i] = w.updates("fin")
	}
	for _, uri := range append(uris, "fin") {
		if text, _, err := c.tool("touch", map[string]string{"uri": uri}); err != nil || text != "touched" {
			t.Fatalf("touch %s: %q %v", uri, text, err)
		}
	}
	for i, w := range ws {
		eventually(t, fmt.Sprintf("an update of fin on stream %d", i), func() (string, bool) {
			n := w.updates("fin")
			return fmt.Sprint(n), n > before[i]
		})
	}
}

// TestBookkeeping_SessionsVanishWhileServerStalls: on a shared server,
// sessions that asked for debug logs and subscribed to resources vanish
// while the server stalls (reads nothing): X is DELETEd with a call in
// flight to the server, D drops its stream and a call in flight and then
// expires idle, E drops its stream and expires idle. Once the server reads
// again it holds exactly the live sessions' subscriptions and the level
// they ask for; its updates reach exactly the live subscribers, once each;
// its log lines reach the one session calling, by that session's level,
// which a closed writer left in the mux's writers would prevent; a new
// subscriber of a URI only a vanished session held subscribes it
// upstream again; the level follows the live sessions as they leave, down
// to "info" when none asks any more; nothing is left after shutdown.
func TestBookkeeping_SessionsVanishWhileServerStalls(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	gate := testkit.NewGate(t)
	m := marker(t, "res")
	s := chaosServer("res", testkit.ChaosOptions{Marker: m, Journal: journal})
	// The stall lasts until two sessions have expired: nothing written to
	// the server meanwhile (a level recomputed as sessions leave) may time
	// out before it reads again, however busy the machine.
	s.Timeout = 2 * testkit.WaitTimeout
	cfg := newConfig(s)
	cfg.Gateway.SessionIdleTimeout = 2 * time.Second
	g := startGateway(t, cfg)

	// Every session holds its stream from its start: none is idle until
	// the test drops it.
	l1, l2, l3 := g.client("res"), g.client("res"), g.client("res")
	w1 := join(t, l1, "error", "a", "fin")
	w2 := join(t, l2, "warning", "a", "b", "fin")
	w3 := join(t, l3, "", "fin")
	x, d, e := g.client("res"), g.client("res"), g.client("res")
	wx := join(t, x, "debug", "a", "b", "x")
	wd := join(t, d, "debug", "a", "d")
	we := join(t, e, "debug", "e")
	waitHolds(t, l3, holds("debug", "a", "b", "d", "e", "fin", "x"))

	// X's call stalls the server.
	xDone := make(chan error, 1)
	go func() {
		id := fmt.Sprint(rpcIDs.Add(1))
		r, err := x.post(callBody(id, "stall", map[string]string{"gate": gate.Path}, ""))
		if err := answeredOnce(r, err, id); err != nil {
			xDone <- err
			return
		}
		if r.answers(id)[0].Error == nil {
			xDone <- fmt.Errorf("the stalled call of a deleted session got a result: %s", r.Msgs)
			return
		}
		xDone <- nil
	}()
	testkit.WaitFor(t, "the server to stall", func() bool { return len(testkit.JournalLines(journal, "stalled")) > 0 })

	// D's call is written to the stalled server; then its client vanishes.
	dctx, dropD := context.WithCancel(context.Background())
	dDone := make(chan struct{})
	go func() {
		defer close(dDone)
		req := d.request(http.MethodPost, callBody(fmt.Sprint(rpcIDs.Add(1)), "echo", map[string]string{"message": "lost"}, ""))
		_, _ = d.do(req.WithContext(dctx), nil) // it never gets its answer: its client left
	}()
	eventually(t, "D's call in flight beside X's", func() (string, bool) {
		v, err := g.metric("mcpgate_server_pending_requests", `server="res"`)
		return fmt.Sprint(v, err), err == nil && v >= 2
	})
	dropD()
	<-dDone
	wd.stop()
	we.stop()
	mustDelete(t, x)
	if err := testkit.Receive(t, xDone, "the deleted session's stalled call to be answered"); err != nil {
		t.Error(err)
	}
	wx.stop()
	waitSessions(t, g, "res", 3) // D and E expired
	gate.Open(t)

	// The server reads again: the unsubscriptions and the level change the
	// vanished sessions left reach it.
	waitHolds(t, l3, holds("warning", "a", "b", "fin"))
	names := []string{"l1", "l2", "l3"}
	live := []*watcher{w1, w2, w3}
	touchAll(t, l3, live, "a", "b", "x", "d", "e")
	checkUpdates(t, names, live, []map[string]int{{"a": 1}, {"a": 1, "b": 1}, {}}, "a", "b", "x", "d", "e")

	// Log lines go to the one session with a call written, at its level.
	for _, lc := range []struct {
		name  string
		c     *client
		level string
		want  int
	}{
		{"l1", l1, "error", 1},
		{"l1", l1, "warning", 0}, // below the level l1 asked for
		{"l2", l2, "warning", 1},
		{"l3", l3, "error", 0}, // l3 asked for no logs
	} {
		text, notes, err := lc.c.tool("log", map[string]string{"level": lc.level, "message": "line"})
		if err != nil || text != "logged" {
			t.Fatalf("%s: log %s: %q %v", lc.name, lc.level, text, err)
		}
		if notes != lc.want {
			t.Errorf("%s: a log line at %s reached it %d times, want %d", lc.name, lc.level, notes, lc.want)
		}
	}

	// A URI only a vanished session held: its new subscriber is its first.
	n := g.client("res")
	wn := join(t, n, "", "d", "fin")
	waitHolds(t, l3, holds("warning", "a", "b", "d", "fin"))
	names, live = append(names, "n"), append(live, wn)
	touchAll(t, l3, live, "d")
	checkUpdates(t, names, live, []map[string]int{{}, {}, {}, {"d": 1}}, "d")

	// The level follows the live sessions as they leave.
	mustDelete(t, l2)
	waitHolds(t, l3, holds("error", "a", "d", "fin"))
	mustDelete(t, l1)
	waitHolds(t, l3, holds("info", "d", "fin"))
	for _, w := range []*watcher{w1, w2, w3, wn} {
		w.stop()
	}
	g.stop()
	base.check(t, m)
}

// TestBookkeeping_SessionLeavesDuringItsSetLevel: a session's
// logging/setLevel is written to a stalled server, and the session ends
// before the answer comes: it is DELETEd, or its client drops the request
// (the session living on). The server reads that level later; the gateway
// must then set it back to what the live sessions ask ("error"), not leave
// it at the departed request's "debug".
func TestBookkeeping_SessionLeavesDuringItsSetLevel(t *testing.T) {
	for _, how := range []string{"deleted", "dropped"} {
		t.Run(how, func(t *testing.T) {
			base := takeBaseline()
			journal := filepath.Join(t.TempDir(), "journal")
			gate := testkit.NewGate(t)
			m := marker(t, "res")
			s := chaosServer("res", testkit.ChaosOptions{Marker: m, Journal: journal})
			s.Timeout = 2 * testkit.WaitTimeout // no request times out while the server stalls
			g := startGateway(t, newConfig(s))
			l1, l3, y := g.client("res"), g.client("res"), g.client("res")
			w1 := join(t, l1, "error")
			w3 := join(t, l3, "")
			wy := join(t, y, "")
			waitHolds(t, l3, holds("error"))

			stalled := make(chan error, 1)
			go func() {
				_, _, err := l3.tool("stall", map[string]string{"gate": gate.Path})
				stalled <- err
			}()
			testkit.WaitFor(t, "the server to stall", func() bool { return len(testkit.JournalLines(journal, "stalled")) > 0 })
			ctx, drop := context.WithCancel(context.Background())
			yDone := make(chan struct{})
			go func() {
				defer close(yDone)
				req := y.request(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
				_, _ = y.do(req.WithContext(ctx), nil) // an error either way: its session or its client leaves
			}()
			eventually(t, "the setLevel written beside the stalled call", func() (string, bool) {
				v, err := g.metric("mcpgate_server_pending_requests", `server="res"`)
				return fmt.Sprint(v, err), err == nil && v >= 2
			})
			if how == "deleted" {
				mustDelete(t, y)
			} else {
				drop()
			}
			<-yDone
			drop()
			gate.Open(t)
			if err := testkit.Receive(t, stalled, "the stalled call's answer"); err != nil {
				t.Fatal(err)
			}
			waitHolds(t, l3, holds("error"))
			for _, w := range []*watcher{w1, w3, wy} {
				w.stop()
			}
			g.stop()
			base.check(t, m)
		})
	}
}
