package faults

import (
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestFault6_GarbageAndHugeLines: a server that writes 1,000 lines of
// garbage and one 50 MB line (over maxLineBytes) right after initialize
// still serves its calls, the other server stays fast, and the gateway
// keeps none of it in memory.
func TestFault6_GarbageAndHugeLines(t *testing.T) {
	base := takeBaseline()
	mBad, mOK := marker(t, "garbage"), marker(t, "ok")
	garbage := chaosServer("garbage", testkit.ChaosOptions{Marker: mBad, GarbageLines: 1000, HugeLineBytes: 50 << 20})
	// Skipping 50 MB under the race detector on a busy machine takes
	// seconds: the call waits for it (the point is that it is answered,
	// and the heap is measured once the line is behind the gateway).
	garbage.Timeout = time.Minute
	cfg := newConfig(garbage, fakeServer("ok", testkit.FakeOptions{Marker: mOK}))
	g := startGateway(t, cfg)
	healthy := g.client("ok")
	healthy.connect(t)
	heap0 := liveHeap()
	healthyDuring(t, healthy, func() {
		c := g.client("garbage")
		if err := c.tryConnect(); err != nil {
			t.Errorf("session on the garbage server: %v", err)
			return
		}
		// Written after the garbage and the huge line: once it is back,
		// the gateway has read past them.
		if _, err := c.echo(1, "after the garbage"); err != nil {
			t.Errorf("call after garbage and a 50 MB line: %v", err)
		}
	})
	if growth := liveHeap() - heap0; growth > 16<<20 {
		t.Errorf("live heap grew by %d MiB after a 50 MB line, want it dropped", growth>>20)
	}
	g.stop()
	base.check(t, mBad, mOK)
}
