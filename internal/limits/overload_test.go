package limits

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Under real concurrency the cap is never exceeded, and every slot taken
// is given back.
func TestOverloadConcurrentAdmit(t *testing.T) {
	o := &overload{max: 3}
	var inside, peak atomic.Int64
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 500 {
				release, ref := o.admit(time.Now)
				if ref != nil {
					if ref.Status != http.StatusServiceUnavailable || ref.AuditOutcome() != OutcomeOverloaded || ref.Retry < time.Second {
						t.Errorf("refusal %+v", ref)
					}
					refused.Add(1)
					continue
				}
				n := inside.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inside.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 3 {
		t.Errorf("%d admitted at once, cap 3", p)
	}
	if n := o.inFlight.Load(); n != 0 {
		t.Errorf("%d slots still taken", n)
	}
	t.Logf("%d of 8000 refused", refused.Load())
}

// Retry-After is the expected wait for the first of the requests in
// flight to end: average/(n+1), within [1 s, 30 s].
func TestOverloadRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		avg  time.Duration
		n    int64
		want time.Duration
	}{
		{0, 5, time.Second},                           // nothing ended yet
		{50 * time.Millisecond, 100, time.Second},     // short calls: the floor
		{60 * time.Second, 9, 6 * time.Second},        // minute-long calls, 9 in flight
		{10 * time.Minute, 1, overloadRetryMax},       // the ceiling
		{90 * time.Second, 2, 30 * time.Second},       // exactly the ceiling
		{3 * time.Second, 1, 1500 * time.Millisecond}, // Retry-After rounds it up to 2
	} {
		o := &overload{max: tt.n}
		o.avg.Store(int64(tt.avg))
		if got := o.retryAfter(tt.n); got != tt.want {
			t.Errorf("avg %v, %d in flight: %v, want %v", tt.avg, tt.n, got, tt.want)
		}
	}
	// The average follows the durations of the POSTs that ended.
	clock := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o := &overload{max: 1}
	release, _ := o.admit(clock.Now)
	clock.advance(8 * time.Second)
	release()
	if got := time.Duration(o.avg.Load()); got != 8*time.Second {
		t.Errorf("average %v after one POST of 8s", got)
	}
	release, _ = o.admit(clock.Now)
	if _, ref := o.admit(clock.Now); ref == nil || RetryAfter(ref.Retry) != "4" {
		t.Errorf("refusal %+v, want Retry-After 4 (8s / 2)", ref)
	}
	release()
}
