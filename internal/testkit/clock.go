package testkit

import (
	"sync"
	"time"
)

// Clock is a fake clock a test moves, safe for concurrent use: pass its Now
// where a component takes a clock (a Config's Now field), and Advance it
// instead of sleeping.
type Clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// NewClock returns a Clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
