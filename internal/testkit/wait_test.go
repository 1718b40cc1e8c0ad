package testkit

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordingTB is a testing.TB whose Fatalf records the message and ends the
// calling goroutine, as the real one does.
type recordingTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f on a goroutine of its own (Fatalf ends it) and returns what
// Fatalf recorded, "" when f returned normally.
func (r *recordingTB) run(f func()) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	rec := &recordingTB{TB: t}
	if msg := rec.run(func() { waitFor(rec, "three increments", time.Hour, func() bool { return n.Load() == 3 }) }); msg != "" {
		t.Fatalf("WaitFor failed: %s", msg)
	}
}

func TestWaitForReportsWhatItWaitedFor(t *testing.T) {
	rec := &recordingTB{TB: t}
	msg := rec.run(func() {
		waitFor(rec, "the session to be swept", 20*time.Millisecond, func() bool { return false })
		t.Error("waitFor returned after Fatalf")
	})
	if !strings.Contains(msg, "the session to be swept") {
		t.Fatalf("failure message %q does not name what was awaited", msg)
	}
}

func TestReceiveReturnsTheValueOrReportsWhat(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	rec := &recordingTB{TB: t}
	var got int
	if msg := rec.run(func() { got = receive(rec, ch, "a value", time.Hour) }); msg != "" || got != 7 {
		t.Fatalf("Receive = %d, failure %q; want 7", got, msg)
	}
	msg := rec.run(func() {
		receive(rec, ch, "the reply to reach the client", 20*time.Millisecond)
		t.Error("receive returned after Fatalf")
	})
	if !strings.Contains(msg, "the reply to reach the client") {
		t.Fatalf("failure message %q does not name what was awaited", msg)
	}
	close(ch)
	rec = &recordingTB{TB: t}
	if msg := rec.run(func() { got = receive(rec, ch, "a close", time.Hour) }); msg != "" || got != 0 {
		t.Fatalf("Receive on a closed channel = %d, failure %q; want 0", got, msg)
	}
}
