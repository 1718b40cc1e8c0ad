package authserver

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Brute-force limits of the sign-in page: failed sign-ins are counted
// per user name and per client address. The first throttleFree failures
// of a key cost nothing; after that each further attempt must wait a
// delay that doubles with every failure (1 s, 2 s, 4 s, ... up to
// throttleMaxDelay), counted from the end of the failed check, and an
// attempt made sooner is refused with a 429 page without checking the
// password at all, so a guesser gets a few hundred guesses a day at
// most, and spends no hashing time of ours on refused ones. A key
// forgets its failures throttleForget after the last one, and a
// successful sign-in forgets the user's (not the address's: an attacker
// with an account of their own must not be able to reset the count of the
// address they guess from).
const (
	throttleFree     = 5
	throttleBase     = time.Second
	throttleMaxDelay = 15 * time.Minute
	throttleForget   = time.Hour
	// throttleMaxKeys bounds the table: past it, the key idle longest
	// goes first, never a configured user's (keep). Someone spraying
	// user names from many addresses can push an address's or an
	// unknown name's entry out, but never a real user's count, nor past
	// the per-address count of the address they use at the moment.
	throttleMaxKeys = 10000
)

// throttle counts failures per key ("user:NAME", "addr:PREFIX"). mu
// guards keys; nothing is called while holding it.
type throttle struct {
	now func() time.Time
	// max bounds the table but for the keep keys (throttleMaxKeys;
	// tests lower it); keep are the keys of the configured users, which
	// are never evicted: a guesser who floods the table with fresh keys
	// would otherwise wipe the count of the user they guess and get
	// throttleFree guesses again each time. Both are set before use.
	max  int
	keep map[string]bool

	mu   sync.Mutex
	keys map[string]*failures
}

type failures struct {
	n    int       // failures since the key was last forgotten
	last time.Time // of the last failure
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, max: throttleMaxKeys, keys: map[string]*failures{}}
}

// delay is the wait after n failures before the next attempt.
func throttleDelay(n int) time.Duration {
	if n < throttleFree {
		return 0
	}
	d := throttleBase
	for i := throttleFree; i < n && d < throttleMaxDelay; i++ {
		d *= 2
	}
	return min(d, throttleMaxDelay)
}

// wait returns how long an attempt by every one of keys must still wait
// (the longest of their waits); zero lets the attempt go on.
func (t *throttle) wait(keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waitLocked(t.now(), keys)
}

// attempt is wait and fail at once: an attempt that may go on is
// counted as a failure before its secret is checked, and one that
// succeeds takes it back (succeeded). Checked first and counted after,
// a burst of attempts sent together would all pass the check before the
// first of them failed: a guesser's hundreds of guesses in parallel
// instead of throttleFree.
func (t *throttle) attempt(keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if d := t.waitLocked(now, keys); d > 0 {
		return d
	}
	t.failLocked(now, keys)
	return 0
}

// failed restarts the wait of every one of keys at now: attempt counted
// the failure when the check began, and a slow check (a password hash on
// a busy machine takes a second or more) must not use up the delay the
// failure earns, or the next guess would wait nothing.
func (t *throttle) failed(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, k := range keys {
		if f := t.keys[k]; f != nil && now.After(f.last) {
			f.last = now
		}
	}
}

// succeeded takes back the failure attempt counted against every one
// of keys.
func (t *throttle) succeeded(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		if f := t.keys[k]; f != nil {
			if f.n--; f.n <= 0 {
				delete(t.keys, k)
			}
		}
	}
}

func (t *throttle) waitLocked(now time.Time, keys []string) time.Duration {
	var longest time.Duration
	for _, k := range keys {
		f := t.keys[k]
		if f == nil {
			continue
		}
		if now.Sub(f.last) >= throttleForget {
			delete(t.keys, k)
			continue
		}
		longest = max(longest, f.last.Add(throttleDelay(f.n)).Sub(now))
	}
	return longest
}

// fail counts a failed attempt against every one of keys (attempt
// counts its own; fail is for a failure found without one).
func (t *throttle) fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failLocked(t.now(), keys)
}

func (t *throttle) failLocked(now time.Time, keys []string) {
	for _, k := range keys {
		f := t.keys[k]
		if f == nil || now.Sub(f.last) >= throttleForget {
			if f == nil && len(t.keys) >= t.max {
				t.evictLocked(now)
			}
			f = &failures{}
			t.keys[k] = f
		}
		f.n++
		f.last = now
	}
}

// forget drops key's failures (a successful sign-in of that user).
func (t *throttle) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, key)
}

// evictLocked makes room for one key: the forgotten ones go, else the
// one idle longest that is not a configured user's.
func (t *throttle) evictLocked(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for k, f := range t.keys {
		if now.Sub(f.last) >= throttleForget {
			delete(t.keys, k)
			continue
		}
		if !t.keep[k] && (oldest == "" || f.last.Before(oldestAt)) {
			oldest, oldestAt = k, f.last
		}
	}
	if len(t.keys) >= t.max && oldest != "" {
		delete(t.keys, oldest)
	}
}

// userKey and addrKey name a throttle's keys.
func userKey(name string) string { return "user:" + strings.ToLower(name) }

func addrKey(r *http.Request, trustProxy bool) string { return "addr:" + clientPrefix(r, trustProxy) }

// clientPrefix is the address the request came from, as the unit a
// guesser controls: the address itself for IPv4, its /64 for IPv6 (one
// host commonly holds a whole /64). X-Forwarded-For counts only when
// the gateway trusts its proxy (gateway.trustProxyHeaders), and then
// only its last entry, the one that proxy appended: the ones before it
// are the client's to write.
func clientPrefix(r *http.Request, trustProxy bool) string {
	addr := r.RemoteAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	if trustProxy {
		if fwd := r.Header.Values("X-Forwarded-For"); len(fwd) > 0 {
			last := fwd[len(fwd)-1]
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = last[i+1:]
			}
			if last = strings.TrimSpace(last); last != "" {
				addr = last
			}
		}
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
