package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcpgate/mcpgate/internal/sse"
)

// streamState is what a reader of one logical SSE stream keeps across the
// connections that carry it (the first, then each resumption).
type streamState struct {
	lastID    string        // Last-Event-ID to resume with; "" if none seen
	retry     time.Duration // the server's last retry hint; 0 if none
	oversized bool          // an event over the limit was dropped
}

// readEvents reads one SSE response body and delivers the data of its
// message events to generation gen, until the body ends. Events without
// data (priming events) only move the resumption cursor. It returns how
// many messages it delivered and the error that ended the body (io.EOF for
// a clean end). visit, if not nil, sees each event's data first and may
// claim it (return true) so that it is not delivered.
//
// An event over MaxMessageBytes ends the read at once, reported to
// Handler.Oversized and in st.oversized, with an error wrapping
// sse.ErrEventTooLarge: the rest of it is not read (a peer may stream an
// endless event), so the caller must close the body.
func (c *Client) readEvents(gen uint64, body io.Reader, st *streamState, visit func(ev sse.Event) bool) (int, error) {
	tap := &prefixTap{r: body, limit: c.cfg.MaxMessageBytes}
	r := sse.NewReader(tap, c.cfg.MaxMessageBytes)
	n := 0
	for {
		ev, err := r.Next()
		if errors.Is(err, sse.ErrEventTooLarge) || errors.Is(err, errRawTooLarge) {
			st.oversized = true
			prefix := tap.big
			if prefix == nil {
				prefix = tap.cur
			}
			c.oversized(gen, prefix, max(tap.n, c.cfg.MaxMessageBytes+1))
			return n, fmt.Errorf("%w (%d bytes read)", sse.ErrEventTooLarge, tap.n)
		}
		if err != nil {
			return n, err
		}
		if id := r.LastEventID(); id != "" {
			st.lastID = id
		}
		if d := r.Retry(); d > 0 {
			st.retry = d
		}
		if visit != nil && visit(ev) {
			continue
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 || (ev.Event != "" && ev.Event != "message") {
			continue
		}
		c.deliver(gen, ev.Data)
		n++
	}
}

// errRawTooLarge is returned by prefixTap.Read once a line or an event is
// longer than the sse.Reader could accept.
var errRawTooLarge = errors.New("remote: event stream line or event over the size limit")

// Raw bounds of prefixTap, beyond the limit on an event's data: a line may
// add its field name (the sse.Reader allows 64 bytes for it); an event may
// be made of many short data lines, each adding "data:" and a line end to
// the byte or two it counts ("data\r\n" adds one "\n" for six raw bytes).
const (
	rawLineSlack   = 64
	rawEventFactor = 8
)

// prefixTap passes an event stream through unchanged and keeps the first
// OversizedPrefixLen bytes of the raw event being read, so that an event the
// sse.Reader rejects as too large can be shown to Handler.Oversized. The
// Reader reads ahead, so the tap may be an event ahead of it; with limits
// far above the read-ahead (4 KiB) the captured prefix is the rejected
// event's. big holds the prefix of the latest event whose raw size passed
// the limit.
//
// The sse.Reader reads an overlong line to its end before rejecting it, so
// the tap stops the stream itself: a Read that finds a line longer than
// limit+rawLineSlack, or an event longer than rawEventFactor*limit, returns
// the bytes before it and errRawTooLarge (sticky). Nothing the Reader could
// accept is cut.
type prefixTap struct {
	r      io.Reader
	limit  int
	cur    []byte // start of the raw event being read
	n      int    // raw bytes of that event so far
	line   int    // raw bytes of the line being read so far
	lastLF bool   // the previous non-CR byte was LF
	big    []byte
	err    error // errRawTooLarge once a bound was passed
}

func (t *prefixTap) Read(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.r.Read(p)
	for i, b := range p[:n] {
		switch {
		case b == '\r':
			t.line = 0
			continue // CRLF line ends look like LF ones
		case b == '\n' && t.lastLF:
			t.cur, t.n, t.line, t.lastLF = t.cur[:0], 0, 0, false
			continue
		}
		t.lastLF = b == '\n'
		t.n++
		if b == '\n' {
			t.line = 0
		} else {
			t.line++
		}
		if len(t.cur) < OversizedPrefixLen {
			t.cur = append(t.cur, b)
		}
		if t.n == t.limit+1 {
			t.big = append(t.big[:0], t.cur...)
		}
		if t.line > t.limit+rawLineSlack || t.n > rawEventFactor*t.limit+rawLineSlack {
			t.err = errRawTooLarge
			return i, t.err
		}
	}
	return n, err
}

// isEventStream reports whether a response carries an SSE stream.
func isEventStream(mt string) bool { return mt == "text/event-stream" }

// ctxDone reports whether ctx has ended.
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }
