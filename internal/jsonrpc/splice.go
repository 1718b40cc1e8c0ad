package jsonrpc

import (
	"cmp"
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
	var stack [8]Edit
	sorted := stack[:0]
	if len(edits) > len(stack) {
		sorted = make([]Edit, 0, len(edits))
	}
	size := len(raw)
	for _, e := range edits {
		if !e.Span.Present() {
			continue
		}
		if e.Span.Start < 0 || e.Span.Start > e.Span.End || e.Span.End > len(raw) {
			panic(fmt.Sprintf("jsonrpc: Splice: span [%d:%d] out of range for %d bytes", e.Span.Start, e.Span.End, len(raw)))
		}
		sorted = append(sorted, e)
		size += len(e.Value) - e.Span.Len()
	}
	slices.SortFunc(sorted, func(a, b Edit) int { return cmp.Compare(a.Span.Start, b.Span.Start) })

	dst = slices.Grow(dst, size)
	pos := 0
	for i, e := range sorted {
		if e.Span.Start < pos || i > 0 && e.Span.Start == sorted[i-1].Span.Start {
			panic(fmt.Sprintf("jsonrpc: Splice: span [%d:%d] overlaps another edit", e.Span.Start, e.Span.End))
		}
		dst = append(dst, raw[pos:e.Span.Start]...)
		dst = append(dst, e.Value...)
		pos = e.Span.End
	}
	return append(dst, raw[pos:]...)
}
