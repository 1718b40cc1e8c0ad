package stdio

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type gotLine struct {
	text string
	size int
	over bool
}

func readAll(t *testing.T, r io.Reader, max int) ([]gotLine, error) {
	t.Helper()
	return readAllBuf(t, r, readBufSize, max)
}

func readAllBuf(t *testing.T, r io.Reader, bufSize, max int) ([]gotLine, error) {
	t.Helper()
	lr := newLineReader(r, bufSize, max)
	var out []gotLine
	for {
		line, size, over, err := lr.next()
		if err != nil {
			return out, err
		}
		out = append(out, gotLine{string(line), size, over})
	}
}

// reference splits input the obvious way, for comparison.
func reference(input []byte, max int) []gotLine {
	var out []gotLine
	for len(input) > 0 {
		line, rest, _ := bytes.Cut(input, []byte("\n"))
		input = rest
		switch {
		case len(line) == 0:
		case len(line) > max:
			out = append(out, gotLine{string(line[:min(len(line), OversizedPrefixLen)]), len(line), true})
		default:
			out = append(out, gotLine{string(line), len(line), false})
		}
	}
	return out
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("L", 3*readBufSize+17)
	for _, tc := range []struct {
		name, in string
		max      int
	}{
		{"simple", "a\nbb\nccc\n", 10},
		{"no final newline", "a\nlast", 10},
		{"empty lines skipped", "\n\na\n\n\nb\n", 10},
		{"exactly max", "12345\n123456\n1\n", 5},
		{"spans buffers", long + "\nnext\n", len(long)},
		{"oversized spanning buffers", long + "\nnext\n", readBufSize},
		{"oversized at EOF", "ok\n" + long, 100},
		{"oversized with small max", strings.Repeat("y", 9000) + "\nz\n", 10},
		{"crlf kept", "a\r\nb\r\n", 10},
		{"empty input", "", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := reference([]byte(tc.in), tc.max)
			for _, r := range []io.Reader{
				strings.NewReader(tc.in),
				iotest.OneByteReader(strings.NewReader(tc.in)),
				iotest.HalfReader(strings.NewReader(tc.in)),
			} {
				got, err := readAll(t, r, tc.max)
				if err != io.EOF {
					t.Fatalf("err %v", err)
				}
				if !equalLines(got, want) {
					t.Fatalf("got %v\nwant %v", got, want)
				}
			}
		})
	}
}

func TestLineReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("whole\npart"), iotest.ErrReader(boom))
	got, err := readAll(t, r, 100)
	if !errors.Is(err, boom) || len(got) != 1 || got[0].text != "whole" {
		t.Fatalf("got %v, %v; want [whole], boom (a cut partial line is dropped)", got, err)
	}
}

func equalLines(a, b []gotLine) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nb\n\nccc"), 2)
	f.Add([]byte(strings.Repeat("x", 5000)+"\n"), 100)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		max = 1 + int(uint(max)%uint(2*readBufSize))
		got, err := readAll(t, iotest.HalfReader(bytes.NewReader(in)), max)
		if err != io.EOF {
			t.Fatalf("err %v", err)
		}
		want := reference(in, max)
		if !equalLines(got, want) {
			t.Fatalf("max %d: got %d lines, want %d", max, len(got), len(want))
		}
		// The stderr reader's small buffer (and the smallest there is)
		// split lines the same way.
		for _, size := range []int{stderrBufSize, 16} {
			got, err = readAllBuf(t, iotest.HalfReader(bytes.NewReader(in)), size, max)
			if err != io.EOF || !equalLines(got, want) {
				t.Fatalf("buffer %d, max %d: got %d lines (err %v), want %d", size, max, len(got), err, len(want))
			}
		}
	})
}

// A 1 MiB line is read straight into the reader's buffer, which grows by
// doubling: a reader that has it all takes a handful of reads (a 64 KiB
// window took sixteen, and a copy of every one), and the next small line
// comes from the same buffer.
func TestLineReaderBigLineFewReads(t *testing.T) {
	big := strings.Repeat("b", 1<<20)
	reads := 0
	lr := newLineReader(countingReader{strings.NewReader(big + "\nsmall\n"), &reads}, readBufSize, DefaultMaxLineBytes)
	line, size, over, err := lr.next()
	if err != nil || over || size != len(big) || string(line) != big {
		t.Fatalf("big line: %d bytes, over %v, err %v", size, over, err)
	}
	if reads > 7 {
		t.Errorf("%d reads for a 1 MiB line", reads)
	}
	if line, _, _, err = lr.next(); err != nil || string(line) != "small" {
		t.Fatalf("next line %q, err %v", line, err)
	}
	if len(lr.buf) > keepLineBuf {
		t.Errorf("buffer of %d bytes kept after the line", len(lr.buf))
	}
}

// A line bigger than keepLineBuf does not pin its buffer: the reader goes
// back to its first size once the line is handed out, keeping what it read
// after it.
func TestLineReaderShrinksAfterHugeLine(t *testing.T) {
	huge := strings.Repeat("h", keepLineBuf+10)
	lr := newLineReader(strings.NewReader(huge+"\nafter\nlast"), readBufSize, DefaultMaxLineBytes)
	if line, _, _, err := lr.next(); err != nil || len(line) != len(huge) {
		t.Fatalf("huge line: %d bytes, err %v", len(line), err)
	}
	for _, want := range []string{"after", "last"} {
		line, _, _, err := lr.next()
		if err != nil || string(line) != want {
			t.Fatalf("got %q, err %v; want %q", line, err, want)
		}
		if len(lr.buf) != readBufSize {
			t.Errorf("buffer of %d bytes after the huge line, want %d", len(lr.buf), readBufSize)
		}
	}
	if _, _, _, err := lr.next(); err != io.EOF {
		t.Fatalf("err %v, want EOF", err)
	}
}

type countingReader struct {
	r io.Reader
	n *int
}

func (c countingReader) Read(p []byte) (int, error) {
	*c.n++
	return c.r.Read(p)
}
