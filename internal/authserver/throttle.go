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
// throttleMaxDelay), and an attempt made sooner is refused with a 429
// page without checking the password at all, so a guesser gets a few
// hundred guesses a day at most, and spends no hashing time of ours on
// refused ones. A key forgets its failures throttleForget after the
// last one, and a successful sign-in forgets the user's (not the
// address's: an attacker with an account of their own must not be able
// to reset the count of the address they guess from).
const (
	throttleFree     = 5
	throttleBase     = time.Second
	throttleMaxDelay = 15 * time.Minute
	throttleForget   = time.Hour
	// throttleMaxKeys bounds the table: past it, the key idle longest
	// goes first. Someone spraying user names from many addresses can
	// push an entry out, but never past the per-address count of the
	// address they use at the moment.
	throttleMaxKeys = 10000
)

// throttle counts failures per key ("user:NAME", "addr:PREFIX"). mu
// guards keys; nothing is called while holding it.
type throttle struct {
	now func() time.Time

	mu   sync.Mutex
	keys map[string]*failures
}

type failures struct {
	n    int       // failures since the key was last forgotten
	last time.Time // of the last failure
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, keys: map[string]*failures{}}
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
	now := t.now()
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

// fail counts a failed attempt against every one of keys.
func (t *throttle) fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, k := range keys {
		f := t.keys[k]
		if f == nil || now.Sub(f.last) >= throttleForget {
			if f == nil && len(t.keys) >= throttleMaxKeys {
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
// one idle longest.
func (t *throttle) evictLocked(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for k, f := range t.keys {
		if now.Sub(f.last) >= throttleForget {
			delete(t.keys, k)
			continue
		}
		if oldest == "" || f.last.Before(oldestAt) {
			oldest, oldestAt = k, f.last
		}
	}
	if len(t.keys) >= throttleMaxKeys {
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
