package stdio

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 30*time.Second
	minRand := func(int64) int64 { return 0 }
	maxRand := func(n int64) int64 { return n - 1 }
	for _, tc := range []struct {
		n          int
		least, top time.Duration
	}{
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 400 * time.Millisecond, 800 * time.Millisecond},
		{8, 12800 * time.Millisecond, 25600 * time.Millisecond},
		{9, 15 * time.Second, 30 * time.Second},  // capped
		{70, 15 * time.Second, 30 * time.Second}, // no shift overflow
	} {
		if got := backoff(lo, hi, tc.n, minRand); got != tc.least {
			t.Errorf("n=%d: least %v, want %v", tc.n, got, tc.least)
		}
		if got := backoff(lo, hi, tc.n, maxRand); got != tc.top {
			t.Errorf("n=%d: top %v, want %v", tc.n, got, tc.top)
		}
	}
	if got := backoff(1, 1, 5, maxRand); got != 1 {
		t.Errorf("tiny backoff %v", got)
	}
}
