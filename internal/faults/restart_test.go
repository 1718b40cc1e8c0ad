package faults

import (
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestBookkeeping_CrashRestoresLiveSessionsState: a shared server's
// process is killed while sessions hold subscriptions and logging levels.
// The sessions outlive the crash (the mux keeps them, and restores their
// state on the restarted process: mux.restoreState): the new process is
// subscribed to exactly the URIs live sessions hold and set to the level
// they ask for, and neither a session deleted before the crash (V) nor one
// deleted while the server was down (W) counts. Afterwards each update
// reaches its subscribers once, a new subscriber of a URI only V held
// subscribes it upstream again, and the level and subscriptions follow a
// session leaving.
func TestBookkeeping_CrashRestoresLiveSessionsState(t *testing.T) {
	base := takeBaseline()
	gate := testkit.NewGate(t)
	m := marker(t, "res")
	// Every start waits at the gate: the restarted process is held there
	// while W is deleted.
	s := fakeServer("res", testkit.FakeOptions{Marker: m, StartGate: gate.Path})
	s.InitTimeout = 2 * testkit.WaitTimeout // held at the gate, however long the machine takes
	g := startGateway(t, newConfig(s))
	gate.Open(t)

	l1, l2, v, w := g.client("res"), g.client("res"), g.client("res"), g.client("res")
	w1 := join(t, l1, "error", "a", "fin")
	w2 := join(t, l2, "warning", "a", "b", "fin")
	wv := join(t, v, "debug", "a", "c")
	ww := join(t, w, "debug", "b", "w")
	waitHolds(t, l1, holds("debug", "a", "b", "c", "fin", "w"))
	wv.stop()
	mustDelete(t, v)
	waitHolds(t, l1, holds("debug", "a", "b", "fin", "w"))

	victim := l1.pidOf(t, int(rpcIDs.Add(1)))
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the restarted process, held at its gate", func() bool {
		for _, pid := range testkit.Procs(m) {
			if pid != victim {
				return true
			}
		}
		return false
	})
	ww.stop()
	mustDelete(t, w)
	gate.Open(t)

	// Polled through l1: its first calls may find the server still
	// starting, and fail.
	waitHolds(t, l1, holds("warning", "a", "b", "fin"))
	if pid := l1.pidOf(t, int(rpcIDs.Add(1))); pid == victim {
		t.Fatalf("still served by the killed process %d", pid)
	}
	names, live := []string{"l1", "l2"}, []*watcher{w1, w2}
	touchAll(t, l1, live, "a", "b", "c", "w")
	checkUpdates(t, names, live, []map[string]int{{"a": 1}, {"a": 1, "b": 1}}, "a", "b", "c", "w")

	n := g.client("res")
	wn := join(t, n, "", "c", "fin")
	waitHolds(t, l1, holds("warning", "a", "b", "c", "fin"))
	names, live = append(names, "n"), append(live, wn)
	touchAll(t, l1, live, "a", "c")
	checkUpdates(t, names, live, []map[string]int{{"a": 2}, {"a": 2, "b": 1}, {"c": 1}}, "a", "b", "c", "w")

	mustDelete(t, l2)
	waitHolds(t, l1, holds("error", "a", "c", "fin"))
	for _, w := range []*watcher{w1, w2, wn} {
		w.stop()
	}
	g.stop()
	base.check(t, m)
}
