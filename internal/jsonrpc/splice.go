package jsonrpc

import (
	"fmt"
	"slices"
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

	dst = slices.Grow(dst, size)
	pos := 0
	for k, i := range order {
		e := edits[i]
		if e.Span.Start < pos || k > 0 && e.Span.Start == edits[order[k-1]].Span.Start {
			panic(fmt.Sprintf("jsonrpc: Splice: span [%d:%d] overlaps another edit", e.Span.Start, e.Span.End))
		}
		dst = append(dst, raw[pos:e.Span.Start]...)
		dst = append(dst, e.Value...)
		pos = e.Span.End
	}
	return append(dst, raw[pos:]...)
}
