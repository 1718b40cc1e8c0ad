package buffers

import (
	"bytes"
	"sync"
	"testing"
)

func TestGetCapacity(t *testing.T) {
	for _, n := range []int{0, 1, MinPooled - 1, MinPooled, MinPooled + 1, 64<<10 - 1, 64 << 10, 1<<20 + 1, MaxPooled, MaxPooled + 1, 3 * MaxPooled} {
		b := Get(n)
		if len(*b) != 0 || cap(*b) < n {
			t.Errorf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		if n <= MaxPooled && cap(*b) >= 2*max(n, MinPooled) {
			t.Errorf("Get(%d): cap %d, more than its class", n, cap(*b))
		}
		if n > MaxPooled && cap(*b) != n {
			t.Errorf("Get(%d) above MaxPooled: cap %d, want exactly n", n, cap(*b))
		}
		Put(b)
	}
}

// A buffer given back is filed in the class its capacity fills, never a
// bigger one: one grown by append to 5000 bytes serves requests of 4096.
func TestClasses(t *testing.T) {
	cases := []struct{ n, up, down int }{
		{MinPooled, 0, 0},
		{MinPooled + 1, 1, 0},
		{2 * MinPooled, 1, 1},
		{3 * MinPooled, 2, 1},
		{MaxPooled, maxShift - minShift, maxShift - minShift},
	}
	for _, c := range cases {
		if got := classUp(c.n); got != c.up {
			t.Errorf("classUp(%d) = %d, want %d", c.n, got, c.up)
		}
		if got := classDown(c.n); got != c.down {
			t.Errorf("classDown(%d) = %d, want %d", c.n, got, c.down)
		}
	}
	for n := 1; n <= MaxPooled; n = n*3/2 + 1 {
		if 1<<(minShift+classUp(n)) < n {
			t.Errorf("class %d of %d is too small", classUp(n), n)
		}
	}
	for c := MinPooled; c <= MaxPooled; c = c*5/4 + 7 {
		if 1<<(minShift+classDown(c)) > c {
			t.Errorf("%d filed in class %d, above its capacity", c, classDown(c))
		}
	}
}

func TestPutIgnoresWhatItDoesNotKeep(t *testing.T) {
	Put(nil)
	small := make([]byte, 10, 100)
	Put(&small)
	if len(small) != 10 {
		t.Error("a buffer below MinPooled was reset: it was kept")
	}
	huge := make([]byte, 10, MaxPooled+1)
	Put(&huge)
	if len(huge) != 10 {
		t.Error("a buffer above MaxPooled was reset: it was kept")
	}
}

// Buffers lent at once are distinct, and what one owner writes is not seen
// by another: hammered from many goroutines under -race.
func TestConcurrentOwners(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				n := (g*7919 + i*104729) % (MaxPooled / 2)
				if i%25 == 0 {
					n = MaxPooled + i // not pooled
				}
				b := Get(n)
				*b = (*b)[:n]
				fill := byte(g*31 + i)
				if n > 0 {
					(*b)[0] = fill
				}
				for done := 1; done < n; done *= 2 {
					copy((*b)[done:], (*b)[:done])
				}
				if got := bytes.Count(*b, []byte{fill}); got != n {
					t.Errorf("%d of %d bytes of a buffer in use are its owner's: it is shared", got, n)
					return
				}
				Put(b)
			}
		})
	}
	wg.Wait()
}

func BenchmarkGetPut1MiB(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		p := Get(1 << 20)
		*p = append(*p, 'x')
		Put(p)
	}
}
