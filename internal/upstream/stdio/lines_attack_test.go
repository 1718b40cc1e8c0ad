package stdio

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// A huge line followed, in the same read, by megabytes of small lines: the
// buffer is swapped for a small one at most once, not once per small line
// while what is left of the read still exceeds keepLineBuf (each swap
// copies all of it: a quadratic cost, seconds of CPU for a few megabytes).
// A pipe hands over at most its capacity per read, 64 KiB by default, but
// a child may enlarge its stdout pipe; every line still comes out whole.
func TestLineReaderSwapsBufferOnceAfterHugeLine(t *testing.T) {
	huge := strings.Repeat("h", 5<<20)
	var in bytes.Buffer
	in.WriteString(huge + "\n")
	const small = 20000
	for i := range small {
		fmt.Fprintf(&in, "line %06d %s\n", i, strings.Repeat("s", 180))
	}
	lr := newLineReader(&in, readBufSize, DefaultMaxLineBytes)
	if line, _, _, err := lr.next(); err != nil || len(line) != len(huge) {
		t.Fatalf("huge line: %d bytes, err %v", len(line), err)
	}
	swaps := 0
	prev := &lr.buf[0]
	for i := range small {
		line, _, _, err := lr.next()
		if err != nil || !strings.HasPrefix(string(line), fmt.Sprintf("line %06d ", i)) || len(line) != 192 {
			t.Fatalf("line %d: %.20q (%d bytes), err %v", i, line, len(line), err)
		}
		if p := &lr.buf[0]; p != prev {
			swaps++
			prev = p
		}
	}
	if swaps > 2 { // the swap, and at most one growth for the last partial line
		t.Fatalf("the buffer was replaced %d times while the rest of one read was handed out", swaps)
	}
	if _, _, _, err := lr.next(); err != io.EOF {
		t.Fatalf("err %v, want EOF", err)
	}
}
