package mux

import (
	"sync"
	"time"
)

// warnEvery is the interval a rateLimit allows one log line per.
const warnEvery = time.Second

// rateLimit lets through one log line of one kind per warnEvery and counts
// the ones it held back, so that a flood (a server writing garbage or
// unroutable requests as fast as it can) costs one line per second, not one
// per message, and the log still says how many there were. Safe for
// concurrent use.
type rateLimit struct {
	now func() time.Time // time.Now; tests inject a clock

	mu         sync.Mutex
	next       time.Time // guarded by mu: when the next line may be logged
	suppressed int       // guarded by mu: lines held back since the last one logged
}

// allow reports whether a line may be logged now and, if so, how many lines
// were held back since the previous one (to log along with it).
func (r *rateLimit) allow() (ok bool, suppressed int) {
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	t := now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.Before(r.next) {
		r.suppressed++
		return false, 0
	}
	r.next = t.Add(warnEvery)
	suppressed, r.suppressed = r.suppressed, 0
	return true, suppressed
}
