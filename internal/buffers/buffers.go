// Package buffers lends byte slices in power-of-two size classes for the
// large, short-lived messages of the data path: a request spliced for a
// server's stdin, the stdin queue's copy of it, a request body being read.
// A 1 MiB message then costs no fresh allocation per call, so no zeroing
// and, once the garbage collector has returned idle memory to the kernel,
// no page faults: the first profiles of 1 MiB echoes spent more CPU there
// than in copying.
//
// Ownership: a buffer has one owner at a time, who may hand it to another
// goroutine (the stdin writer), and is Put back once, by its last owner,
// when nothing refers to its bytes any more. Buffers are never shared:
// each call site states when its buffer is given back.
//
// What is kept: buffers of MinPooled to MaxPooled bytes, in sync.Pools, so
// an idle gateway keeps none of them past two garbage collections; smaller
// ones are cheap to allocate and bigger ones are rare, so both are left to
// the collector. Safe for concurrent use.
package buffers

import (
	"math/bits"
	"sync"
)

const (
	minShift = 12
	maxShift = 22

	// MinPooled is the smallest size class: Get of less returns a buffer
	// of this capacity.
	MinPooled = 1 << minShift
	// MaxPooled is the largest size class (4 MiB): Get of more allocates
	// exactly, and Put drops buffers above it.
	MaxPooled = 1 << maxShift
)

// pools[i] holds buffers whose capacity is at least 1<<(minShift+i).
var pools [maxShift - minShift + 1]sync.Pool

// Get returns a buffer of length 0 and capacity at least n, its own until
// it is given back with Put.
func Get(n int) *[]byte {
	if n > MaxPooled {
		b := make([]byte, 0, n)
		return &b
	}
	i := classUp(n)
	if p, _ := pools[i].Get().(*[]byte); p != nil {
		return p
	}
	b := make([]byte, 0, 1<<(minShift+i))
	return &b
}

// Put gives b back for reuse; b and its bytes must not be used after. A
// buffer whose capacity is outside MinPooled..MaxPooled (one grown past
// its class by append, or a small one) is left to the garbage collector;
// nil is ignored.
func Put(b *[]byte) {
	if b == nil {
		return
	}
	c := cap(*b)
	if c < MinPooled || c > MaxPooled {
		return
	}
	*b = (*b)[:0]
	pools[classDown(c)].Put(b)
}

// classUp returns the index of the smallest class that holds n bytes.
func classUp(n int) int {
	if n <= MinPooled {
		return 0
	}
	return bits.Len(uint(n-1)) - minShift
}

// classDown returns the index of the largest class not above c, so that
// every buffer filed in a class is at least that class's size.
func classDown(c int) int {
	return bits.Len(uint(c)) - 1 - minShift
}
