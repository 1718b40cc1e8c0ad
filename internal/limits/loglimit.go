package limits

import (
	"sync"
	"time"
)

// logEvery is the interval a LogLimit allows one line per, by default.
const logEvery = time.Second

// LogLimit lets one log line of one kind through per logEvery (or its
// own interval) and counts the lines it held back, so that a client
// repeating a failing request as fast as it can costs one line per
// second, and the log still says how many there were. The zero value is ready; safe for concurrent use.
type LogLimit struct {
	Every time.Duration // the interval; 0: logEvery

	mu   sync.Mutex
	next time.Time // guarded by mu: when the next line may be logged
	held int       // guarded by mu: lines held back since the last one logged
}

// Allow reports whether a line may be logged at now and, if so, how many
// were held back since the previous one.
func (l *LogLimit) Allow(now time.Time) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.next) {
		l.held++
		return false, 0
	}
	every := l.Every
	if every <= 0 {
		every = logEvery
	}
	l.next = now.Add(every)
	held, l.held = l.held, 0
	return true, held
}
