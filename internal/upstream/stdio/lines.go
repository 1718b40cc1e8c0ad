package stdio

import (
	"bufio"
	"io"
)

// readBufSize is the reader's buffer: lines up to this size are delivered
// straight from it without a copy.
const readBufSize = 64 << 10

// keepLineBuf is the largest assembled-line buffer kept between lines; a
// bigger one (after a multi-megabyte reply) is released. A 1 MiB payload,
// escaped and wrapped, fits: such replies reuse one buffer.
const keepLineBuf = 2 << 20

// lineReader splits a stream into lines with one reusable bufio.Reader. Lines
// longer than the buffer are assembled, lines over max are skipped to their
// newline and reported with their first OversizedPrefixLen bytes, and a final
// line without a newline is still returned at EOF. Empty lines are skipped:
// they carry no message. Not safe for concurrent use.
type lineReader struct {
	br     *bufio.Reader
	max    int
	line   []byte // assembles a line that spans reads
	prefix []byte // the start of an oversized line
}

func newLineReader(r io.Reader, bufSize, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, bufSize), max: max}
}

// next returns the next non-empty line without its newline, valid until the
// next call. For a line longer than max it returns over=true, the line's
// prefix and its full size. At the end it returns io.EOF, or the read error
// (then a partial line is dropped: the stream was cut, not ended).
func (r *lineReader) next() (line []byte, size int, over bool, err error) {
	if cap(r.line) > keepLineBuf {
		r.line = nil
	}
	r.line, r.prefix = r.line[:0], r.prefix[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		switch err {
		case nil, bufio.ErrBufferFull, io.EOF:
		default:
			return nil, 0, false, err
		}
		complete := err == nil
		if complete {
			frag = frag[:len(frag)-1]
		}
		if !over && size+len(frag) > r.max {
			over = true
			r.prefix = append(r.prefix, r.line[:min(len(r.line), OversizedPrefixLen)]...)
			r.line = r.line[:0]
		}
		switch {
		case over:
			if room := OversizedPrefixLen - len(r.prefix); room > 0 {
				r.prefix = append(r.prefix, frag[:min(room, len(frag))]...)
			}
		case complete && size == 0:
			// The whole line is in the buffer: hand it out without a copy.
			if len(frag) == 0 {
				continue
			}
			return frag, len(frag), false, nil
		default:
			r.line = append(r.line, frag...)
		}
		size += len(frag)

		if complete || (err == io.EOF && size > 0) {
			switch {
			case over:
				return r.prefix, size, true, nil
			case size > 0:
				return r.line, size, false, nil
			}
			continue // an empty line assembled from nothing
		}
		if err == io.EOF {
			return nil, 0, false, io.EOF
		}
	}
}
