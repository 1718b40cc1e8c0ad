package authserver

import (
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// TestThrottleHoldsConcurrentGuesses: a guesser who sends many sign-ins
// at once must not get them all checked because none of them had failed
// yet when each was let through: an attempt counts before its password
// is compared, so at most throttleFree are compared.
func TestThrottleHoldsConcurrentGuesses(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	var compared atomic.Int32
	f.l.passwords.compared = func() { compared.Add(1) }
	const guesses = 4 * throttleFree
	var wg sync.WaitGroup
	var throttled atomic.Int32
	for range guesses {
		wg.Go(func() {
			w := f.post(f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "username": {"alice"}, "password": {"guess"}})
			if w.Code == http.StatusTooManyRequests {
				throttled.Add(1)
			}
		})
	}
	wg.Wait()
	if n := compared.Load(); n > throttleFree {
		t.Errorf("%d concurrent guesses compared, want at most %d", n, throttleFree)
	}
	if n := throttled.Load(); n != guesses-throttleFree {
		t.Errorf("%d of %d concurrent guesses throttled, want %d", n, guesses, guesses-throttleFree)
	}
}

// TestThrottleSuccessesDoNotCount: the attempt counted before the check
// is taken back when the password is right, so signing in again and
// again from one address never throttles it.
func TestThrottleSuccessesDoNotCount(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	for i := range 2 * throttleFree {
		req := f.newRequest(t)
		w := f.post(f.l.url("/oauth/login", req.ID), url.Values{"csrf": {req.CSRF}, "username": {"alice"}, "password": {"correct horse"}})
		if w.Code != http.StatusSeeOther {
			t.Fatalf("sign-in %d: %d", i+1, w.Code)
		}
	}
	if d := f.l.throttle.wait(addrKey(newFormRequest(f, "/", nil), false)); d != 0 {
		t.Errorf("the address waits %v after sign-ins that all succeeded", d)
	}
}
