package authserver

import (
	"net"
	"net/http"
	"net/netip"
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
// Behind a proxy every request comes from the proxy's address, so the
// buckets are then one bucket for everyone; still a bound, only a
// coarser one.
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

// registerBucket is the bucket of a request: its IPv4 address, or its
// IPv6 /64. An address that does not parse (a test's pipe) is its own
// bucket, shared by all who send that string.
func registerBucket(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits) // bits fit the address family
	return p.String()
}
