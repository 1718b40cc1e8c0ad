package stdio

import (
	"bytes"
	"io"
)

// readBufSize is the reader's first buffer: it grows for a longer line.
const readBufSize = 64 << 10

// keepLineBuf is the largest buffer kept between lines; a bigger one (after
// a multi-megabyte reply) is swapped for a readBufSize one once the line is
// handed out and no more than keepLineBuf of what was read after it waits. A 1 MiB payload, escaped and wrapped, fits: such replies
// reuse one buffer.
const keepLineBuf = 2 << 20

// lineReader splits a stream into lines. It reads straight into one buffer
// and hands out each line as a slice of it: a line is never assembled from
// fragments, so a 1 MiB reply costs no copy here, and the buffer, grown to
// hold the longest line up to max, takes a large pipe's contents in one
// read. Lines over max are skipped to their newline and reported with
// their first OversizedPrefixLen bytes, and a final line without a newline
// is still returned at EOF. Empty lines are skipped: they carry no
// message. Not safe for concurrent use.
type lineReader struct {
	rd     io.Reader
	size   int    // the first buffer's size, kept for after a huge line
	max    int    // the longest line returned whole
	buf    []byte // buf[start:end] is read and not yet handed out
	start  int
	scan   int // buf[start:scan] holds no newline
	end    int
	err    error  // the read error to report once the buffer is used up
	over   bool   // skipping the rest of an oversized line
	skip   int    // its bytes so far
	prefix []byte // its start
}

func newLineReader(r io.Reader, bufSize, max int) *lineReader {
	return &lineReader{rd: r, size: bufSize, max: max, buf: make([]byte, bufSize)}
}

// next returns the next non-empty line without its newline, valid until the
// next call. For a line longer than max it returns over=true, the line's
// prefix and its full size. At the end it returns io.EOF, or the read error
// (then a partial line is dropped: the stream was cut, not ended).
func (r *lineReader) next() (line []byte, size int, over bool, err error) {
	if len(r.buf) > keepLineBuf && r.end-r.start <= keepLineBuf {
		// Not while more than keepLineBuf is pending: the new buffer would
		// be as big, and swapped again at the next call, copying all that
		// is pending each time.
		r.shrink()
	}
	for {
		if i := bytes.IndexByte(r.buf[r.scan:r.end], '\n'); i >= 0 {
			nl := r.scan + i
			line = r.buf[r.start:nl]
			r.start, r.scan = nl+1, nl+1
			if r.over {
				return r.endOversized(line)
			}
			if len(line) == 0 {
				continue
			}
			if len(line) > r.max {
				r.beginOversized(nil)
				return r.endOversized(line)
			}
			return line, len(line), false, nil
		}
		r.scan = r.end
		if pending := r.end - r.start; r.over || pending > r.max {
			// No newline yet: an oversized line's bytes so far are only
			// counted (and the first of them kept), never buffered.
			if !r.over {
				r.beginOversized(r.buf[r.start:r.end])
			} else {
				r.skipped(r.buf[r.start:r.end])
			}
			r.start, r.scan, r.end = 0, 0, 0
		}
		if r.err != nil {
			return r.atEnd()
		}
		r.fill()
	}
}

// fill reads once into the buffer's free space, first moving the pending
// bytes to its front or growing it (to at most max+1: one byte more than
// max is all it takes to know a line is oversized).
func (r *lineReader) fill() {
	if r.end == len(r.buf) {
		pending := r.end - r.start
		if grow := min(2*len(r.buf), r.max+1); pending < len(r.buf)/2 || grow <= len(r.buf) {
			copy(r.buf, r.buf[r.start:r.end])
		} else {
			grown := make([]byte, grow)
			copy(grown, r.buf[r.start:r.end])
			r.buf = grown
		}
		r.start, r.scan, r.end = 0, r.scan-r.start, pending
	}
	n, err := r.rd.Read(r.buf[r.end:])
	r.end += n
	r.err = err
}

// atEnd returns what is left once the reader has failed or ended: the
// final line without a newline at EOF, else the error.
func (r *lineReader) atEnd() ([]byte, int, bool, error) {
	if r.err != io.EOF {
		r.start, r.scan, r.end, r.over = 0, 0, 0, false
		return nil, 0, false, r.err
	}
	line := r.buf[r.start:r.end]
	r.start, r.scan = r.end, r.end
	switch {
	case r.over:
		return r.endOversized(line)
	case len(line) > 0:
		return line, len(line), false, nil
	}
	return nil, 0, false, io.EOF
}

// beginOversized starts skipping a line, of which b is the start.
func (r *lineReader) beginOversized(b []byte) {
	r.over, r.skip, r.prefix = true, 0, r.prefix[:0]
	r.skipped(b)
}

// skipped counts b, the next bytes of an oversized line.
func (r *lineReader) skipped(b []byte) {
	if room := OversizedPrefixLen - len(r.prefix); room > 0 {
		r.prefix = append(r.prefix, b[:min(room, len(b))]...)
	}
	r.skip += len(b)
}

// endOversized reports an oversized line whose last bytes are rest.
func (r *lineReader) endOversized(rest []byte) ([]byte, int, bool, error) {
	r.skipped(rest)
	r.over = false
	return r.prefix, r.skip, true, nil
}

// shrink swaps a buffer grown past keepLineBuf for one of the first size
// (or the pending bytes' size), so one huge reply does not pin it.
func (r *lineReader) shrink() {
	pending := r.end - r.start
	b := make([]byte, max(r.size, pending))
	copy(b, r.buf[r.start:r.end])
	r.buf = b
	r.start, r.scan, r.end = 0, r.scan-r.start, pending
}
