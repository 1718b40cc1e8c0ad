package loadgen

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	prevHi := uint64(0)
	for i := range numBuckets {
		lo, hi := bucketRange(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucket(lo) != i || bucket(hi) != i {
			t.Fatalf("bucket %d [%d,%d] maps back to %d, %d", i, lo, hi, bucket(lo), bucket(hi))
		}
		if lo >= 256 && float64(hi-lo+1)/float64(lo) > 1.0/128 {
			t.Fatalf("bucket %d [%d,%d] wider than 1/128 of its values", i, lo, hi)
		}
		prevHi = hi
	}
	if bucket(1<<62) != numBuckets-1 {
		t.Errorf("huge values are not clamped into the last bucket")
	}
}

func TestQuantiles(t *testing.T) {
	var h Histogram
	for v := 1; v <= 10000; v++ {
		h.Record(time.Duration(v) * time.Microsecond)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.9, 9000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {1, 10000 * time.Microsecond}} {
		got := h.Quantile(tt.q)
		if diff := float64(got-tt.want) / float64(tt.want); diff > 0.008 || diff < -0.008 {
			t.Errorf("Quantile(%v) = %v, want %v within 0.8%%", tt.q, got, tt.want)
		}
	}
	if h.Max() != 10*time.Millisecond || h.Min() != time.Microsecond || h.Count() != 10000 {
		t.Errorf("max %v min %v count %d", h.Max(), h.Min(), h.Count())
	}
	if m := h.Mean(); m != 5000500*time.Nanosecond {
		t.Errorf("mean %v", m)
	}
	var empty Histogram
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram reports values")
	}
}

func TestMergeEqualsRecordingOnce(t *testing.T) {
	var all, a, b, merged Histogram
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		d := time.Duration(r.ExpFloat64() * float64(300*time.Microsecond))
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	merged.Merge(&a)
	merged.Merge(&b)
	merged.Merge(&Histogram{})
	if merged != all {
		t.Fatalf("merged histogram differs: count %d vs %d, p99 %v vs %v", merged.Count(), all.Count(), merged.Quantile(0.99), all.Quantile(0.99))
	}
}
