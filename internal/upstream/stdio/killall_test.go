package stdio

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// KillAll kills the whole process group of every live child of every
// Stdio at once, grandchildren included, even of children that ignore
// SIGTERM and stdin EOF; without it they would outlive a gateway that exits
// on a second signal. Not parallel: KillAll reaches every Stdio of the
// process.
func TestKillAllKillsEveryGroup(t *testing.T) {
	const stopGrace = 10 * time.Second
	mk := marker(t)
	var rs []*recorder
	for range 2 {
		cfg := fakeConfig(t, testkit.FakeOptions{
			RawEcho: true, IgnoreStdinEOF: true, IgnoreSIGTERM: true, SpawnGrandchild: true, Marker: mk,
		})
		cfg.StopGrace = stopGrace // Close must not be what kills them
		s, r := start(t, cfg)
		if err := s.Send(context.Background(), []byte("ready?")); err != nil {
			t.Fatal(err)
		}
		r.waitLine("ready?")
		rs = append(rs, r)
	}
	if procs := testkit.Procs(mk); len(procs) != 4 {
		t.Fatalf("want 2 fakes and 2 grandchildren, found %v", procs)
	}
	begin := time.Now()
	if n := KillAll(); n != 2 {
		t.Errorf("KillAll signalled %d groups, want 2", n)
	}
	// Waiting for the children (which ignore SIGTERM) would last a
	// StopGrace at least; a busy machine does not come near it.
	if took := time.Since(begin); took >= stopGrace {
		t.Errorf("KillAll took %v: it must not wait", took)
	}
	if left := testkit.WaitProcsGone(mk, failAfter); len(left) > 0 {
		t.Fatalf("processes left after KillAll: %v", left)
	}
	for _, r := range rs {
		r.waitEvent("exited", 1) // the Stdio noticed, as for any exit
	}
	// Reaped processes leave the registry: nothing is signalled twice.
	testkit.WaitFor(t, "registry empty", func() bool {
		live.mu.Lock()
		defer live.mu.Unlock()
		return len(live.procs) == 0
	})
	if n := KillAll(); n != 0 {
		t.Errorf("second KillAll signalled %d groups, want 0", n)
	}
}
