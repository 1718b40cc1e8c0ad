package authserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestThrottleDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{
		0: 0, 4: 0, 5: time.Second, 6: 2 * time.Second, 10: 32 * time.Second,
		14: 512 * time.Second, 15: throttleMaxDelay, 1000: throttleMaxDelay,
	} {
		if got := throttleDelay(n); got != want {
			t.Errorf("throttleDelay(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestThrottlePerUser: after throttleFree wrong passwords for a user, the
// next attempt is a 429 page with Retry-After (even with the right
// password, which is then not checked), from any address; once the
// delay has passed, one attempt goes through, and a wrong one doubles the
// delay; a success forgets the user's failures.
func TestThrottlePerUser(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	from := func(addr, user, pw string) *httptest.ResponseRecorder {
		r := newFormRequest(f, f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "username": {user}, "password": {pw}})
		r.RemoteAddr = addr + ":1000"
		return f.do(r)
	}
	for i := range throttleFree {
		if w := from("192.0.2."+string(rune('1'+i)), "alice", "guess"); w.Code != http.StatusOK {
			t.Fatalf("failure %d: %d", i+1, w.Code)
		}
	}
	var compared int
	f.l.passwords.compared = func() { compared++ }
	w := from("198.51.100.7", "alice", "correct horse")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "Too many attempts") {
		t.Fatalf("throttled: %d, Retry-After %q\n%s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	checkPageHeaders(t, "429 page", w.Header())
	if compared != 0 {
		t.Errorf("a throttled attempt compared %d hashes", compared)
	}
	f.clock.Advance(time.Second)
	if w := from("198.51.100.7", "alice", "guess"); w.Code != http.StatusOK {
		t.Fatalf("after the delay: %d", w.Code)
	}
	if w := from("198.51.100.8", "alice", "guess"); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
		t.Errorf("the delay did not double: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if w := from("198.51.100.8", "bob", "guess"); w.Code != http.StatusOK {
		t.Errorf("another user is throttled: %d", w.Code)
	}
	f.clock.Advance(2 * time.Second)
	if w := from("198.51.100.9", "alice", "correct horse"); w.Code != http.StatusSeeOther {
		t.Fatalf("right password after the delay: %d", w.Code)
	}
	if d := f.l.throttle.wait(userKey("alice")); d != 0 {
		t.Errorf("alice still waits %v after signing in", d)
	}
	if n := strings.Count(f.log.String(), "sign-in throttled"); n != 2 {
		t.Errorf("%d throttled attempts logged, want 2", n)
	}
}

// TestThrottlePerAddress: one address guessing many user names is
// throttled too, and so is the one-time code from it.
func TestThrottlePerAddress(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	for i := range throttleFree {
		w := f.post(f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "username": {"user" + string(rune('a'+i))}, "password": {"x"}})
		if w.Code != http.StatusOK {
			t.Fatalf("failure %d: %d", i+1, w.Code)
		}
	}
	for _, form := range []url.Values{
		{"csrf": {f.req.CSRF}, "username": {"alice"}, "password": {"correct horse"}},
		{"csrf": {f.req.CSRF}, "code": {"AAAA-AAAA-AAAA-AAAA"}},
	} {
		if w := f.post(f.l.url("/oauth/login", f.req.ID), form); w.Code != http.StatusTooManyRequests {
			t.Errorf("%v from a guessing address: %d, want 429", form, w.Code)
		}
	}
}

// TestThrottleForgets: failures are forgotten throttleForget after the
// last one.
func TestThrottleForgets(t *testing.T) {
	c := testkit.NewClock(time.Unix(1e9, 0))
	th := newThrottle(c.Now)
	for range throttleFree + 3 {
		th.fail("user:x")
	}
	if th.wait("user:x") == 0 {
		t.Fatal("not throttled")
	}
	c.Advance(throttleForget)
	if d := th.wait("user:x"); d != 0 {
		t.Errorf("still waits %v after %v", d, throttleForget)
	}
	th.fail("user:x")
	if d := th.wait("user:x"); d != 0 {
		t.Errorf("one failure after forgetting waits %v", d)
	}
}

// TestThrottleBounded: the table never holds more than throttleMaxKeys
// keys; the one idle longest goes first.
func TestThrottleBounded(t *testing.T) {
	c := testkit.NewClock(time.Unix(1e9, 0))
	th := newThrottle(c.Now)
	for i := range throttleMaxKeys + 10 {
		th.fail("k" + strings.Repeat("x", i%7) + string(rune(i)))
		c.Advance(time.Millisecond)
	}
	if n := len(th.keys); n > throttleMaxKeys {
		t.Errorf("%d keys, bound %d", n, throttleMaxKeys)
	}
	if _, ok := th.keys["k"+string(rune(0))]; ok {
		t.Errorf("the oldest key stayed")
	}
}

func TestClientPrefix(t *testing.T) {
	for _, tc := range []struct {
		remote, xff string
		trust       bool
		want        string
	}{
		{"192.0.2.1:443", "", false, "192.0.2.1"},
		{"192.0.2.1:443", "203.0.113.9", false, "192.0.2.1"},
		{"192.0.2.1:443", "203.0.113.9", true, "203.0.113.9"},
		{"192.0.2.1:443", "1.1.1.1, 203.0.113.9", true, "203.0.113.9"},
		{"[2001:db8:1:2:3:4:5:6]:443", "", false, "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.1]:443", "", false, "192.0.2.1"},
		{"pipe", "", false, "pipe"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := clientPrefix(r, tc.trust); got != tc.want {
			t.Errorf("clientPrefix(%q, xff %q, trust %v) = %q, want %q", tc.remote, tc.xff, tc.trust, got, tc.want)
		}
	}
}

// FuzzClientPrefix: whatever the headers, the address never panics and
// the same request gives the same key.
func FuzzClientPrefix(f *testing.F) {
	f.Add("192.0.2.1:443", "1.1.1.1, 203.0.113.9")
	f.Add("[::1]:1", "::ffff:1.2.3.4")
	f.Add("", ",,,")
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		if a, b := clientPrefix(r, true), clientPrefix(r, true); a != b {
			t.Fatalf("%q then %q", a, b)
		}
		if got := clientPrefix(r, false); strings.Contains(xff, "203.0.113.77") && !strings.Contains(remote, "203.0.113.77") && strings.Contains(got, "203.0.113.77") {
			t.Fatalf("untrusted X-Forwarded-For used: %q", got)
		}
	})
}
