package jsonrpc

import (
	"fmt"
)

// IsBatch reports whether the first non-whitespace byte of b is '[', that
// is, whether b should be handed to SplitBatch rather than Parse.
func IsBatch(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '['
	}
	return false
}

// SplitBatch validates b as one non-empty JSON array (whitespace around it
// allowed) and returns its elements as sub-slices of b, in order. The
// elements are valid JSON but are not checked as JSON-RPC messages: callers
// Parse each one, so that one bad element gets its own error reply (and
// Parse checks the keys of each for duplicates).
//
// Malformed JSON wraps [ErrParse]; valid JSON that is not an array, or an
// empty array, wraps [ErrInvalidRequest] (JSON-RPC 2.0, section 6).
func SplitBatch(b []byte) ([][]byte, error) {
	if err := checkUTF8(b); err != nil {
		return nil, err
	}
	w := walker{b: b}
	if w.peek() != '[' || w.i >= len(b) {
		if err := w.skip(0); err != nil {
			return nil, err
		}
		if err := w.finish(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: a batch must be a JSON array", ErrInvalidRequest)
	}
	w.i++
	var elems [][]byte
	if w.peek() == ']' {
		w.i++
	} else {
		for {
			_, s, err := w.value(1)
			if err != nil {
				return nil, err
			}
			elems = append(elems, b[s.Start:s.End:s.End])
			if c := w.peek(); c == ']' {
				w.i++
				break
			} else if c != ',' || w.i >= len(b) {
				return nil, w.unexpected()
			}
			w.i++
			w.peek()
		}
	}
	if err := w.finish(); err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		return nil, fmt.Errorf("%w: empty batch", ErrInvalidRequest)
	}
	return elems, nil
}
