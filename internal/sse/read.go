package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"time"
)

// DefaultMaxEventBytes is the limit NewReader uses when given none.
const DefaultMaxEventBytes = 16 << 20

// ErrEventTooLarge is returned by Reader.Next when an event's data, id and
// event type together exceed the reader's limit. The reader then discards the rest of that event, up
// to the next blank line, so the caller may call Next again.
var ErrEventTooLarge = errors.New("sse: event too large")

// maxFieldName bounds the bytes a line may add to the limit for its field
// name, colon and space, so that a line carrying a full-size data value is
// not mistaken for an oversized one.
const maxFieldName = 64

var bom = []byte("\uFEFF")

// Reader parses an event stream per the WHATWG rules (HTML, 9.2.6
// "Interpreting an event stream"): lines end in CRLF, LF or CR; a leading
// UTF-8 BOM is skipped; lines starting with ':' are comments; "field:value"
// has one optional space after the colon removed; a line without a colon is
// a field with an empty value; data lines are joined with "\n"; unknown
// fields are ignored; an id containing NUL is ignored; retry is used only if
// it is all ASCII digits. An event is dispatched at a blank line if it had a
// data field or, departing from EventSource so that priming events
// ("id: x" and an empty data line, or no data line at all) come through, an
// id field.
//
// Lines of any length are read through a small bufio.Reader; memory grows
// with the event, up to the limit, not with the buffer. A Reader is owned by
// one goroutine.
type Reader struct {
	// Static after construction.
	br  *bufio.Reader
	max int // limit on an event's data, in bytes

	// Line scanning.
	line    []byte // the current line, reused
	skipLF  bool   // the last line ended in CR, so a leading LF is part of it
	started bool   // the BOM check has been done
	err     error  // sticky: the stream has ended or failed

	// The event being read; reset at each blank line.
	inEvent  bool // a field line has been read since the last blank line
	skipping bool // discarding the rest of an oversized event
	data     []byte
	hasData  bool
	id       []byte
	hasID    bool
	event    []byte
	retry    time.Duration

	// Stream state, as EventSource keeps it.
	lastID    string
	reconnect time.Duration
}

// NewReader returns a Reader of the event stream r that rejects events
// whose data, id and event type together exceed maxEventBytes; maxEventBytes <= 0 means
// DefaultMaxEventBytes (16 MiB).
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &Reader{br: bufio.NewReader(r), max: maxEventBytes}
}

// LastEventID returns the id of the last dispatched event that carried one
// (an empty id field resets it to ""), as EventSource's lastEventId: the
// value to send as Last-Event-ID when reconnecting.
func (r *Reader) LastEventID() string { return r.lastID }

// Retry returns the reconnection time set by the last valid retry field, or
// 0 if the stream has set none.
func (r *Reader) Retry() time.Duration { return r.reconnect }

// Next returns the next event. It returns io.EOF when the stream ends
// cleanly (between events), io.ErrUnexpectedEOF when it ends inside an
// event (which is discarded), ErrEventTooLarge for an event over the limit
// (the reader may go on), and otherwise the underlying reader's error. After
// any error other than ErrEventTooLarge, Next returns that error again.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, overflow, err := r.readLine()
		if err != nil {
			partial := len(line) > 0 && line[0] != ':'
			if err == io.EOF && (r.inEvent || r.skipping || partial) {
				err = io.ErrUnexpectedEOF
			}
			r.err = err
			r.resetEvent()
			return Event{}, err
		}
		if len(line) == 0 {
			if r.skipping {
				r.skipping = false
				r.resetEvent()
				continue
			}
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if r.skipping {
			continue
		}
		if err := r.field(line, overflow); err != nil {
			r.resetEvent()
			r.skipping = true
			return Event{}, err
		}
	}
}

// field processes one non-blank line. overflow reports a line cut short at
// the limit: fatal for the event if it is a field the event keeps.
func (r *Reader) field(line []byte, overflow bool) error {
	if line[0] == ':' {
		return nil // comment
	}
	r.inEvent = true
	name, value := line, line[len(line):]
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		n := len(value)
		if r.hasData {
			n++ // the "\n" joining it to the previous line
		}
		if overflow || r.size()+n > r.max {
			return ErrEventTooLarge
		}
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data, r.hasData = append(r.data, value...), true
	case "event":
		if overflow || r.size()-len(r.event)+len(value) > r.max {
			return ErrEventTooLarge
		}
		r.event = append(r.event[:0], value...)
	case "id":
		if overflow || r.size()-len(r.id)+len(value) > r.max {
			return ErrEventTooLarge
		}
		if bytes.IndexByte(value, 0) < 0 {
			r.id, r.hasID = append(r.id[:0], value...), true
		}
	case "retry":
		if ms, ok := parseRetry(value); ok && !overflow {
			r.retry, r.reconnect = ms, ms
		}
	}
	return nil
}

// size is what the event being read counts against the limit.
func (r *Reader) size() int { return len(r.data) + len(r.id) + len(r.event) }

// parseRetry parses a retry value: ASCII digits only, a number of
// milliseconds that fits a time.Duration.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var ms int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
		if ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, false
		}
	}
	return time.Duration(ms) * time.Millisecond, true
}

// dispatch ends the event at a blank line and reports whether it is one to
// return.
func (r *Reader) dispatch() (Event, bool) {
	defer r.resetEvent()
	if r.hasID {
		r.lastID = string(r.id)
	}
	if !r.hasData && !r.hasID {
		return Event{}, false
	}
	ev := Event{Event: string(r.event), Retry: r.retry}
	if r.hasID {
		ev.ID = r.lastID
	}
	switch {
	case len(r.data) == 0:
	case cap(r.data) > 64<<10:
		ev.Data, r.data = r.data, nil // hand a big buffer over rather than copy it
	default:
		ev.Data = bytes.Clone(r.data)
	}
	return ev, true
}

func (r *Reader) resetEvent() {
	r.inEvent, r.hasData, r.hasID = false, false, false
	r.data, r.id, r.event = r.data[:0], r.id[:0], r.event[:0]
	r.retry = 0
}

// readLine returns the next line without its terminator. A line longer than
// the limit is cut short and reported as overflow; the rest of it is read
// and dropped. At the end of the stream it returns the unterminated
// remainder, if any, with the error.
func (r *Reader) readLine() (line []byte, overflow bool, err error) {
	r.line = r.line[:0]
	limit := r.max + maxFieldName
	for {
		if r.br.Buffered() == 0 {
			if _, err := r.br.Peek(1); err != nil {
				return r.line, overflow, err
			}
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.br.Discard(1)
				continue
			}
		}
		i := lineBreak(buf)
		chunk := buf
		if i >= 0 {
			chunk = buf[:i]
		}
		if !overflow {
			if room := limit - len(r.line); len(chunk) > room {
				chunk, overflow = chunk[:room], true
			}
			r.line = append(r.line, chunk...)
		}
		if !r.started && (len(r.line) >= len(bom) || i >= 0 || !bytes.HasPrefix(bom, r.line)) {
			r.started = true
			r.line = bytes.TrimPrefix(r.line, bom)
		}
		if i >= 0 {
			r.skipLF = buf[i] == '\r'
			r.br.Discard(i + 1)
			return r.line, overflow, nil
		}
		r.br.Discard(len(buf))
	}
}

// lineBreak returns the index of the first CR or LF in b, or -1. Two
// vectorised IndexByte scans beat bytes.IndexAny's byte-at-a-time loop; b
// is at most one bufio buffer, so a scan past the line never costs much.
func lineBreak(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}
