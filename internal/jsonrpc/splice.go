package jsonrpc

import (
	"bytes"
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

	if cap(dst)-len(dst) < size && len(order) <= maxJoinEdits {
		return spliceNew(dst, raw, edits, order)
	}
	dst = slices.Grow(dst, size) // many edits: rare, and never a large reply
	pos := 0
	for k, i := range order {
		span := checked(edits, order, k, pos)
		dst = append(dst, raw[pos:span.Start]...)
		dst = append(dst, edits[i].Value...)
		pos = span.End
	}
	return append(dst, raw[pos:]...)
}

// maxJoinEdits is the most edits spliceNew takes.
const maxJoinEdits = 8

// spliceNew is Splice into a new buffer: bytes.Join allocates it exactly
// and, unlike slices.Grow, does not zero what it is about to fill (a
// megabyte cleared and then overwritten, for every large reply). The parts
// go into an array by index, never by append: a value appended to a slice
// is moved to the heap by the compiler's escape analysis, and so would
// every caller's Value be (FromSessionEra builds one on its stack).
func spliceNew(dst, raw []byte, edits []Edit, order []int) []byte {
	var parts [2*maxJoinEdits + 2][]byte
	parts[0] = dst
	n, pos := 1, 0
	for k, i := range order {
		span := checked(edits, order, k, pos)
		parts[n], parts[n+1] = raw[pos:span.Start], edits[i].Value
		n += 2
		pos = span.End
	}
	parts[n] = raw[pos:]
	return bytes.Join(parts[:n+1], nil)
}

// checked returns the span of the k-th edit in order, and panics if it
// overlaps the one before (which ended at pos). It returns the span, not
// the Edit: an Edit returned would make the compiler move every caller's
// Value to the heap (FromSessionEra builds one on its stack).
func checked(edits []Edit, order []int, k, pos int) Span {
	span := edits[order[k]].Span
	if span.Start < pos || k > 0 && span.Start == edits[order[k-1]].Span.Start {
		panic(fmt.Sprintf("jsonrpc: Splice: span [%d:%d] overlaps another edit", span.Start, span.End))
	}
	return span
}
