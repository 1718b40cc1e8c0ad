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
// Parse each one, so that one bad element gets its own error reply.
//
// Malformed JSON wraps [ErrParse]; valid JSON that is not an array, or an
// empty array, wraps [ErrInvalidRequest] (JSON-RPC 2.0, section 6).
func SplitBatch(b []byte) ([][]byte, error) {
	d := getDecoder(b)
	defer putDecoder(d)

	if k := d.dec.PeekKind(); k != '[' {
		if _, _, err := d.readValue(); err != nil {
			return nil, err
		}
		if err := d.finish(b); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: a batch must be a JSON array", ErrInvalidRequest)
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, parseError(err)
	}
	var elems [][]byte
	for d.dec.PeekKind() != ']' {
		_, span, err := d.readValue()
		if err != nil {
			return nil, err
		}
		elems = append(elems, b[span.Start:span.End:span.End])
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, parseError(err)
	}
	if err := d.finish(b); err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		return nil, fmt.Errorf("%w: empty batch", ErrInvalidRequest)
	}
	return elems, nil
}
