package sse

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

type result struct {
	events []Event
	errs   []error
}

// readResults reads r to the end, going on after ErrEventTooLarge.
func readResults(r *Reader) result {
	var res result
	for {
		e, err := r.Next()
		if err == nil {
			res.events = append(res.events, e)
			continue
		}
		res.errs = append(res.errs, err)
		if !errors.Is(err, ErrEventTooLarge) {
			return res
		}
	}
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: hello\n\n",
		"id: 1\r\nevent: message\r\ndata: a\r\ndata: b\r\n\r\n",
		"\uFEFFid: 1\rdata:x\r\rretry: 100\n: comment\ndata\n\n",
		"id: a\x00b\ndata: \n\nid\n\n",
		"data: " + string(bytes.Repeat([]byte("x"), 40)) + "\n\ndata: y\n\n",
		"event: e\x00\ndata: x\n\n",
		"data: a\n\ndata: b",
		"retry: 99999999999999999999\n\n",
	} {
		f.Add([]byte(s))
	}
	const limit = 32
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := readResults(NewReader(bytes.NewReader(in), limit))
		bytewise := readResults(NewReader(iotest.OneByteReader(bytes.NewReader(in)), limit))
		if !eventsEqual(whole.events, bytewise.events) || len(whole.errs) != len(bytewise.errs) {
			t.Fatalf("reading whole and byte by byte differ:\n%+q %v\n%+q %v", whole.events, whole.errs, bytewise.events, bytewise.errs)
		}
		for i := range whole.errs {
			if whole.errs[i] != bytewise.errs[i] {
				t.Fatalf("errors differ: %v vs %v", whole.errs, bytewise.errs)
			}
		}
		if last := whole.errs[len(whole.errs)-1]; last != io.EOF && last != io.ErrUnexpectedEOF {
			t.Fatalf("stream ended with %v", last)
		}

		var out bytes.Buffer
		var written []Event
		for _, e := range whole.events {
			if n := len(e.Data) + len(e.ID) + len(e.Event); n > limit {
				t.Fatalf("event of %d bytes over the limit of %d", n, limit)
			}
			if bytes.ContainsAny(e.Data, "\r") {
				t.Fatalf("data contains CR: %q", e.Data)
			}
			if err := Write(&out, e); err != nil {
				// The reader keeps event types with NUL; the writer refuses them.
				if !errors.Is(err, ErrInvalidField) || !bytes.Contains([]byte(e.Event), []byte{0}) {
					t.Fatalf("Write(%+q): %v", e, err)
				}
				continue
			}
			written = append(written, e)
		}
		again := readResults(NewReader(&out, 0))
		if len(again.errs) != 1 || again.errs[0] != io.EOF {
			t.Fatalf("re-reading: %v", again.errs)
		}
		if !eventsEqual(again.events, written) {
			t.Fatalf("re-read %+q, wrote %+q", again.events, written)
		}
	})
}
