package authserver

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// addrLimiter is a token bucket per client address: registration is open
// to anyone, so one address must not fill the client table or the state
// file. IPv6 addresses share a bucket per /64, the block one subscriber
// usually has. The table is bounded: when it is full, buckets that have
// refilled (they hold no state worth keeping) are dropped, and if none
// has, a new address is refused until one does.
//
// Behind a proxy the gateway does not trust (trustProxyHeaders off)
// every request comes from the proxy's address, so the buckets are then
// one bucket for everyone; still a bound, only a coarser one.
type addrLimiter struct {
	every time.Duration
	burst int
	max   int

	mu      sync.Mutex // guards buckets
	buckets map[string]*rate.Limiter
}

func newAddrLimiter(every time.Duration, burst, max int) *addrLimiter {
	return &addrLimiter{every: every, burst: burst, max: max, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token from the bucket of key (registerBucket) at now.
func (l *addrLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			for k, old := range l.buckets {
				if old.TokensAt(now) >= float64(l.burst) {
					delete(l.buckets, k)
				}
			}
			if len(l.buckets) >= l.max {
				return false
			}
		}
		b = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.buckets[key] = b
	}
	return b.AllowN(now, 1)
}

// registerBucket is the bucket of a request: the client address as the
// sign-in throttle counts it (clientPrefix: an IPv4 address or an IPv6
// /64, the last X-Forwarded-For entry when the gateway trusts its
// proxy). Behind a trusted proxy, the proxy's own address would make one
// bucket for everyone, which one stranger registering in a loop empties
// for all.
func registerBucket(r *http.Request, trustProxy bool) string {
	return clientPrefix(r, trustProxy)
}
