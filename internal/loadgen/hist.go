package loadgen

import (
	"math/bits"
	"time"
)

// Histogram records durations in log-linear buckets, as HdrHistogram does:
// exact below 256 ns, then 128 buckets per power of two, so any recorded
// value is reported within 1/128 (< 0.8%) of itself. Values are clamped to
// about 18 minutes. The zero value is ready to use. A Histogram is owned by
// one goroutine; combine several with Merge.
type Histogram struct {
	counts [numBuckets]uint64
	n      uint64
	max    time.Duration
	min    time.Duration
	sum    time.Duration
}

const (
	subBits    = 7
	subCount   = 1 << subBits // buckets per power of two
	maxBits    = 40           // values up to 2^40 ns (~18 min)
	numBuckets = (maxBits - subBits + 1) * subCount
)

// bucket returns the index of the bucket holding v nanoseconds.
func bucket(v uint64) int {
	if v >= 1<<maxBits {
		v = 1<<maxBits - 1
	}
	if v < 2*subCount {
		return int(v)
	}
	shift := bits.Len64(v) - (subBits + 1)
	return (shift+1)*subCount + int(v>>shift) - subCount
}

// bucketRange returns the smallest and largest values bucket i holds.
func bucketRange(i int) (lo, hi uint64) {
	if i < 2*subCount {
		return uint64(i), uint64(i)
	}
	shift := i/subCount - 1
	lo = uint64(i%subCount+subCount) << shift
	return lo, lo + 1<<shift - 1
}

// Record adds one duration (negative counts as 0).
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	h.counts[bucket(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.n++
	h.max = max(h.max, d)
	h.sum += d
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.n += o.n
	h.max = max(h.max, o.max)
	h.sum += o.sum
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest recorded value, exactly.
func (h *Histogram) Max() time.Duration { return h.max }

// Min returns the smallest recorded value, exactly.
func (h *Histogram) Min() time.Duration { return h.min }

// Mean returns the mean of the recorded values, or 0.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the value below or at which a fraction q (0..1) of the
// recorded values lie: the midpoint of the bucket holding the value of rank
// ceil(q*n), kept within [Min, Max]. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.999999999)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			lo, hi := bucketRange(i)
			v := time.Duration(lo + (hi-lo)/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}
