package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event is one server-sent event.
type Event struct {
	ID    string // "" = no id field
	Event string // "" = no event field (means "message")
	Data  []byte
	// Retry is the reconnection time; 0 = no retry field. It is written
	// in whole milliseconds, rounded down, at least 1.
	Retry time.Duration
}

// ErrInvalidField is wrapped by the error Write and AppendEvent return when
// an event's ID or Event contains CR, LF or NUL, which cannot be written
// (a line break would end the field; the reader ignores ids with NUL).
var ErrInvalidField = errors.New("sse: field contains CR, LF or NUL")

// Write writes one event to w in a single Write call: fields id, event,
// retry, then Data split on "\n", "\r\n" and "\r" into one data line per
// line (an event with no Data writes one empty "data:" line, so that it is
// dispatched), then the blank line. It returns an error, without writing,
// if ID or Event contain CR, LF or NUL.
func Write(w io.Writer, ev Event) error {
	bp := bufPool.Get().(*[]byte)
	b, err := AppendEvent((*bp)[:0], ev)
	if err == nil {
		_, err = w.Write(b)
	}
	if cap(b) <= 64<<10 { // do not pin the buffer of one huge event
		*bp = b
		bufPool.Put(bp)
	}
	return err
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// AppendRetry appends a block holding only a retry field of d (in whole
// milliseconds, rounded down, at least 1), or nothing when d is 0. With no
// data field it dispatches no event: the reader takes the reconnection
// time and gives its application nothing, where an empty "data:" line
// would make an event of empty data (which clients before the priming
// event of 2025-11-25 try to parse as a message).
func AppendRetry(dst []byte, d time.Duration) []byte {
	if d <= 0 {
		return dst
	}
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, max(int64(d/time.Millisecond), 1), 10)
	return append(dst, "\n\n"...)
}

// AppendEvent appends ev in the format Write writes to dst and returns it.
// It does not allocate when dst has room. On error dst is returned as is.
func AppendEvent(dst []byte, ev Event) ([]byte, error) {
	if err := checkField("id", ev.ID); err != nil {
		return dst, err
	}
	if err := checkField("event", ev.Event); err != nil {
		return dst, err
	}
	if ev.ID != "" {
		dst = appendField(dst, "id", ev.ID)
	}
	if ev.Event != "" {
		dst = appendField(dst, "event", ev.Event)
	}
	if ev.Retry > 0 {
		ms := max(int64(ev.Retry/time.Millisecond), 1)
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, ms, 10)
		dst = append(dst, '\n')
	}
	// One data line per line. The next CR and LF are each found once with
	// IndexByte (vectorised) and looked for again only once passed, so
	// the scan stays linear whichever line ending the data uses.
	data := ev.Data
	start, cr, lf := 0, bytes.IndexByte(data, '\r'), bytes.IndexByte(data, '\n')
	for {
		if cr >= 0 && cr < start {
			cr = indexFrom(data, start, '\r')
		}
		if lf >= 0 && lf < start {
			lf = indexFrom(data, start, '\n')
		}
		end := lf
		if cr >= 0 && (lf < 0 || cr < lf) {
			end = cr
		}
		if end < 0 {
			dst = appendField(dst, "data", data[start:])
			break
		}
		dst = appendField(dst, "data", data[start:end])
		start = end + 1
		if end == cr && end+1 == lf {
			start++ // CRLF is one line break
		}
	}
	return append(dst, '\n'), nil
}

// indexFrom returns the index in b of the first c at or after from, or -1.
func indexFrom(b []byte, from int, c byte) int {
	if i := bytes.IndexByte(b[from:], c); i >= 0 {
		return from + i
	}
	return -1
}

// WriteComment writes a comment, ": text" and a blank line; servers send
// them as keep-alives. Text with line breaks becomes one comment line per
// line, so it can never be read as a field.
func WriteComment(w io.Writer, text string) error {
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	for {
		i := strings.IndexAny(text, "\r\n")
		if i < 0 {
			b = appendField(b, "", text)
			break
		}
		b = appendField(b, "", text[:i])
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
	b = append(b, '\n')
	_, err := w.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		bufPool.Put(bp)
	}
	return err
}

// appendField appends "name: value\n", or "name:\n" for an empty value.
// The space after the colon is always written when there is a value: the
// reader removes exactly one, so a value that starts with a space survives.
func appendField[S string | []byte](dst []byte, name string, value S) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':')
	if len(value) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, value...)
	}
	return append(dst, '\n')
}

func checkField(name, v string) error {
	if strings.ContainsAny(v, "\r\n\x00") {
		return &fieldError{name: name, value: v}
	}
	return nil
}

type fieldError struct{ name, value string }

func (e *fieldError) Error() string {
	return "sse: " + e.name + " field " + strconv.Quote(e.value) + " contains CR, LF or NUL"
}

func (e *fieldError) Unwrap() error { return ErrInvalidField }
