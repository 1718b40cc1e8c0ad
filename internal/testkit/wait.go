package testkit

import (
	"runtime"
	"testing"
	"time"
)

// WaitTimeout is how long [WaitFor] and [Receive] wait before they fail the
// test. It is a failure bound, not a delay: both return as soon as what they
// wait for happens. It is far beyond what any awaited event takes on a
// machine whose cores are all busy running -race binaries (seconds at the
// worst), so that only a real block reaches it, and far below the 600 s a
// fake's "slow" tool waits, so that a cancellation that never comes is still
// told apart from the slow call ending on its own.
const WaitTimeout = 60 * time.Second

// pollEvery is how often [WaitFor] checks its condition.
const pollEvery = 5 * time.Millisecond

// WaitFor polls cond until it holds, failing the test with what (the event
// awaited, e.g. "the session to be swept") after [WaitTimeout]. Use it for
// conditions no channel announces (a process table, a counter, a journal
// file); prefer [Receive] when there is a channel.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, WaitTimeout, cond)
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return
			}
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
			return
		}
	}
}

// Receive returns the next value from ch (the zero value once ch is
// closed), failing the test with what after [WaitTimeout].
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return receive(t, ch, what, WaitTimeout)
}

func receive[T any](t testing.TB, ch <-chan T, what string, timeout time.Duration) T {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case v := <-ch:
		return v
	case <-deadline.C:
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
		var zero T
		return zero
	}
}

// SettleGoroutines waits until at most limit goroutines run and returns how
// many do, calling tidy (if not nil) before each count, e.g. to close idle
// connections. It fails the test with what and every goroutine's stack after
// [WaitTimeout].
func SettleGoroutines(t testing.TB, what string, limit int, tidy func()) int {
	t.Helper()
	var n int
	deadline := time.Now().Add(WaitTimeout)
	for {
		if tidy != nil {
			tidy()
		}
		if n = runtime.NumGoroutine(); n <= limit {
			return n
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%s: %d goroutines, want at most %d\n%s", what, n, limit, buf[:runtime.Stack(buf, true)])
			return n
		}
		time.Sleep(pollEvery)
	}
}
