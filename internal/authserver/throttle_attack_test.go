package authserver

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// TestThrottleKeepsKnownUsers: a guesser who fills the throttle's table
// with fresh keys (junk user names from many IPv6 /64s) must not push
// out the count of the user they guess, which would give them
// throttleFree free guesses again each time.
func TestThrottleKeepsKnownUsers(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	th := f.l.throttle
	th.max = 100 // the bound's size does not matter; its eviction does
	for range throttleFree + 1 {
		th.fail(userKey("alice"))
	}
	before := th.wait(userKey("alice"))
	if before == 0 {
		t.Fatal("alice not throttled")
	}
	for i := range th.max + 10 {
		th.fail(userKey(fmt.Sprint("junk", i)), fmt.Sprintf("addr:2001:db8:%x::/64", i))
		f.clock.Advance(time.Millisecond) // alice's is the key idle longest
	}
	if d := th.wait(userKey("alice")); d != before-time.Duration(th.max+10)*time.Millisecond {
		t.Errorf("alice waits %v after the table was flooded, want what was left of %v", d, before)
	}
	if n := len(th.keys); n > th.max+len(f.l.passwords.names()) {
		t.Errorf("%d keys, bound %d and the users'", n, th.max)
	}
}

// TestThrottleDelayCountsFromTheCheck: a password check that takes long
// (a hash on a busy machine) does not use up the delay its failure
// earns: the next guess waits the full delay from the moment the check
// failed, not from the moment it began.
func TestThrottleDelayCountsFromTheCheck(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	f.l.passwords.compared = func() { f.clock.Advance(3 * time.Second) } // each hash takes 3 s
	guess := func() int {
		r := newFormRequest(f, f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "username": {"alice"}, "password": {"guess"}})
		return f.do(r).Code
	}
	for i := range throttleFree {
		if code := guess(); code != http.StatusOK {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	// The last failure began 3 s before it was known; its 1 s delay
	// starts when it was known.
	if code := guess(); code != http.StatusTooManyRequests {
		t.Fatalf("the guess right after %d slow failures: %d, want 429", throttleFree, code)
	}
	if d := f.l.throttle.wait(userKey("alice")); d != throttleDelay(throttleFree) {
		t.Errorf("wait after the slow failure: %v, want the full %v", d, throttleDelay(throttleFree))
	}
}
