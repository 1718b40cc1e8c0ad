package echoserver

import (
	"sync/atomic"
	"time"
)

// sink keeps the busy loops' result alive, so the compiler cannot drop
// their work.
var sink atomic.Uint64

// burnWall spins for d of wall time: the fallback where the thread's CPU
// clock cannot be read.
func burnWall(d time.Duration) {
	x := uint64(1)
	for t0 := time.Now(); time.Since(t0) < d; {
		for range 256 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	sink.Store(x)
}
