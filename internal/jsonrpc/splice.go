package jsonrpc

import (
	"bytes"
	"fmt"
)

// Edit replaces Raw[Span] with Value.
type Edit struct {
	Span  Span
	Value []byte
}

// Splice appends raw with the edits applied (edits in any order,
// non-overlapping) to dst and returns it. Edits whose Span is absent are
// ignored, so a caller may pass m.ProgressToken unconditionally. Value is
// inserted as is: it must be valid JSON of a type allowed where it goes.
//
// Splice panics if a span is out of range for raw or two spans overlap:
// both are programming errors. It does not allocate when dst has room and
// there are at most eight edits.
func Splice(dst, raw []byte, edits ...Edit) []byte {
	// Sort indices, not Edits: copying an Edit would leak its Value to the
	// heap and cost callers an allocation.
	var stack [8]int
	order := stack[:0]
	if len(edits) > len(stack) {
		order = make([]int, 0, len(edits))
	}
	size := len(raw)
	for i, e := range edits {
		if !e.Span.Present() {
			continue
		}
		if e.Span.Start < 0 || e.Span.Start > e.Span.End || e.Span.End > len(raw) {
			panic(fmt.Sprintf("jsonrpc: Splice: span [%d:%d] out of range for %d bytes", e.Span.Start, e.Span.End, len(raw)))
		}
		// Insertion sort by start: there are few edits.
		j := len(order)
		order = append(order, i)
		for ; j > 0 && edits[order[j-1]].Span.Start > e.Span.Start; j-- {
			order[j] = order[j-1]
		}
		order[j] = i
		size += len(e.Value) - e.Span.Len()
	}

	if cap(dst)-len(dst) < size {
		return spliceNew(dst, raw, edits, order)
	}
	pos := 0
	for k := range order {
		e := checked(edits, order, k, pos)
		dst = append(dst, raw[pos:e.Span.Start]...)
		dst = append(dst, e.Value...)
		pos = e.Span.End
	}
	return append(dst, raw[pos:]...)
}

// spliceNew is Splice into a new buffer: bytes.Join allocates it exactly
// and, unlike slices.Grow, does not zero what it is about to fill (a
// megabyte cleared and then overwritten, for every large reply).
func spliceNew(dst, raw []byte, edits []Edit, order []int) []byte {
	var space [2*8 + 2][]byte
	parts := space[:0]
	if len(order) > 8 {
		parts = make([][]byte, 0, 2*len(order)+2)
	}
	parts = append(parts, dst)
	pos := 0
	for k := range order {
		e := checked(edits, order, k, pos)
		parts = append(parts, raw[pos:e.Span.Start], e.Value)
		pos = e.Span.End
	}
	return bytes.Join(append(parts, raw[pos:]), nil)
}

// checked returns the k-th edit in order, and panics if it overlaps the
// one before (which ended at pos).
func checked(edits []Edit, order []int, k, pos int) Edit {
	e := edits[order[k]]
	if e.Span.Start < pos || k > 0 && e.Span.Start == edits[order[k-1]].Span.Start {
		panic(fmt.Sprintf("jsonrpc: Splice: span [%d:%d] overlaps another edit", e.Span.Start, e.Span.End))
	}
	return e
}
