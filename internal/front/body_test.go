package front

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// The body buffer grows as bytes arrive; an announced length is not
// allocated up front.
func TestReadAllDoesNotTrustContentLength(t *testing.T) {
	body, err := readAll(strings.NewReader("0123456789"), 4<<20)
	if err != nil || string(body) != "0123456789" || cap(body) > initialBodyBuf {
		t.Fatalf("%q cap %d err %v", body, cap(body), err)
	}
	big := strings.Repeat("y", 100<<10)
	if body, err = readAll(strings.NewReader(big), -1); err != nil || string(body) != big {
		t.Fatalf("unknown length: %d bytes, err %v", len(body), err)
	}
}

// A big body goes into chunks that double as bytes arrive, to the
// announced length and no further, and is copied once into a buffer of its
// exact length: a 1 MiB body costs a handful of reads and, with the chunks
// pooled, a few allocations, the body's own among them.
func TestReadAllGrowsGeometrically(t *testing.T) {
	big := strings.Repeat("z", 1<<20)
	for _, announced := range []int64{int64(len(big)), -1} {
		reads := 0
		body, err := readAll(countReads{strings.NewReader(big), &reads}, announced)
		if err != nil || string(body) != big {
			t.Fatalf("announced %d: %d bytes, err %v", announced, len(body), err)
		}
		if cap(body) > len(big)+8<<10 {
			t.Errorf("announced %d: buffer of %d bytes for %d", announced, cap(body), len(big))
		}
		if reads > 14 { // 512 bytes doubled past 1 MiB when no length is announced
			t.Errorf("announced %d: %d reads for a 1 MiB body", announced, reads)
		}
		r := strings.NewReader(big)
		var bytesBefore, bytesAfter runtime.MemStats
		runtime.ReadMemStats(&bytesBefore)
		allocs := testing.AllocsPerRun(5, func() {
			r.Reset(big)
			_, _ = readAll(r, announced)
		})
		runtime.ReadMemStats(&bytesAfter)
		perRun := (bytesAfter.TotalAlloc - bytesBefore.TotalAlloc) / 6 // AllocsPerRun adds a warm-up run
		if allocs > 4 && !raceEnabled {
			t.Errorf("announced %d: %v allocations for a 1 MiB body", announced, allocs)
		}
		// The body itself and its first buffer, not the chunks: those come
		// back from the pool. (Under -race a sync.Pool drops some of what
		// it is given, so the bound is loose there.)
		if limit := uint64(len(big)) * 3 / 2; !raceEnabled && perRun > limit {
			t.Errorf("announced %d: %d bytes allocated per 1 MiB body, want at most %d", announced, perRun, limit)
		}
	}
}

// Bodies of every size up to a few chunks come back whole, whatever the
// announced length (exact, unknown, or more than is sent) and however the
// reader splits them.
func TestReadAllSizes(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, initialBodyBuf - 1, initialBodyBuf, initialBodyBuf + 1, 100_000, maxBodyChunk + 12345, 3*maxBodyChunk + 1} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(i*7 + i>>9)
		}
		for _, announced := range []int64{int64(n), -1, int64(n) + 1000} {
			for _, step := range []int{1 << 30, 1000, 4096} {
				if step == 1000 && n > 200_000 {
					continue // a thousand reads a megabyte is slow under -race and proves nothing more
				}
				got, err := readAll(&stepReader{data: want, step: step}, announced)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%d bytes, announced %d, reads of %d: %d bytes back, err %v", n, announced, step, len(got), err)
				}
			}
		}
	}
}

// A reader's error ends the body with that error, after any number of
// chunks.
func TestReadAllError(t *testing.T) {
	boom := errors.New("boom")
	for _, n := range []int{0, 300, 3 * initialBodyBuf} {
		r := io.MultiReader(&stepReader{data: make([]byte, n), step: 4096}, iotest.ErrReader(boom))
		if b, err := readAll(r, -1); !errors.Is(err, boom) || b != nil {
			t.Errorf("after %d bytes: %d bytes, err %v", n, len(b), err)
		}
	}
}

// stepReader returns data at most step bytes per Read.
type stepReader struct {
	data []byte
	step int
}

func (r *stepReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.data)
	r.data = r.data[n:]
	return n, nil
}

type countReads struct {
	r *strings.Reader
	n *int
}

func (c countReads) Read(p []byte) (int, error) {
	*c.n++
	return c.r.Read(p)
}
