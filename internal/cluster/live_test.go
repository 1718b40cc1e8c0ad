package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestMiniredisBeat: two replicas see each other after a beat each; the
// instance key holds the advertised address.
func TestMiniredisBeat(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newClock()
	a, _ := newCluster(t, "a", m.Addr(), clk)
	b, _ := newCluster(t, "b", m.Addr(), clk)
	ctx := context.Background()
	for _, c := range []*Cluster{a, b, a} {
		if err := c.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.Live(); n != 2 {
		t.Errorf("a.Live() = %d, want 2", n)
	}
	if alive, known := a.Alive("b"); !alive || !known {
		t.Errorf("a.Alive(b) = %v, %v; want true, true", alive, known)
	}
	if got, _ := m.Get(a.keys.instance("b")); got != "b.test:8080" {
		t.Errorf("b's instance key holds %q, want its advertise address", got)
	}
}

// TestHeartbeatsAndExpiry: three replicas on a real Redis see each other;
// when one stops beating, the others drop it once three heartbeats have
// passed on their clock, and not before. A view older than three beats
// (Redis unreachable) no longer says who is alive.
func TestHeartbeatsAndExpiry(t *testing.T) {
	addr := testkit.Redis(t)
	clk := newClock()
	a, _ := newCluster(t, "a", addr, clk)
	b, _ := newCluster(t, "b", addr, clk)
	c, _ := newCluster(t, "c", addr, clk)
	ctx := context.Background()
	beat := func(cs ...*Cluster) {
		t.Helper()
		for _, x := range cs {
			if err := x.Beat(ctx); err != nil {
				t.Fatalf("%s: Beat: %v", x.Instance(), err)
			}
		}
	}
	beat(a, b, c, a, b)
	for _, x := range []*Cluster{a, b} {
		if n := x.Live(); n != 3 {
			t.Errorf("%s: Live() = %d, want 3", x.Instance(), n)
		}
		for _, id := range []string{"a", "b", "c"} {
			if alive, known := x.Alive(id); !alive || !known {
				t.Errorf("%s: Alive(%s) = %v, %v; want true, true", x.Instance(), id, alive, known)
			}
		}
	}
	// An instance no view listed may have started since the last beat:
	// unknown, not gone.
	if alive, known := a.Alive("nobody"); alive || known {
		t.Errorf("Alive(nobody) = %v, %v; want false, false", alive, known)
	}
	d, _ := newCluster(t, "d", addr, clk)
	beat(d)
	if alive, known := a.Alive("d"); alive || known {
		t.Errorf("a.Alive(d), d started after a's last beat = %v, %v; want false, false (unknown: dial it)", alive, known)
	}

	// c stops beating (killed). Just under three beats later it still counts.
	clk.Advance(3*time.Second - time.Millisecond)
	beat(a, b)
	if alive, _ := a.Alive("c"); !alive {
		t.Error("c dropped before three heartbeats passed")
	}
	clk.Advance(2 * time.Millisecond)
	beat(a, b)
	if alive, known := a.Alive("c"); alive || !known {
		t.Errorf("a.Alive(c) after three missed beats = %v, %v; want false, true", alive, known)
	}
	if n := b.Live(); n != 2 {
		t.Errorf("b.Live() = %d after c died, want 2", n)
	}

	// a's view goes stale (no beat for three heartbeats): unknown.
	clk.Advance(3*time.Second + time.Millisecond)
	if alive, known := a.Alive("b"); alive || known {
		t.Errorf("a.Alive(b) with a stale view = %v, %v; want false, false", alive, known)
	}
	if alive, known := a.Alive("a"); !alive || !known {
		t.Errorf("a.Alive(a) = %v, %v; want true, true", alive, known)
	}
	if n := a.Live(); n != 2 {
		t.Errorf("a.Live() with a stale view = %d, want the last known 2", n)
	}
}

// TestRunBeats: Run announces the replica without being asked (on the
// real clock: the first beat is at once).
func TestRunBeats(t *testing.T) {
	addr := testkit.Redis(t)
	a, _ := newCluster(t, "a", addr, nil)
	b, _ := newCluster(t, "b", addr, nil)
	run(t, a)
	run(t, b)
	testkit.WaitFor(t, "a to see b", func() bool {
		alive, _ := a.Alive("b")
		return alive
	})
}
