package remote

import (
	"bytes"
	"context"
	"errors"
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
func (c *Client) readEvents(gen uint64, body io.Reader, st *streamState, visit func(ev sse.Event) bool) (int, error) {
	tap := &prefixTap{r: body, limit: c.cfg.MaxMessageBytes}
	r := sse.NewReader(tap, c.cfg.MaxMessageBytes)
	n := 0
	for {
		ev, err := r.Next()
		if errors.Is(err, sse.ErrEventTooLarge) {
			st.oversized = true
			c.oversized(gen, tap.big, c.cfg.MaxMessageBytes+1)
			continue
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

// prefixTap passes an event stream through unchanged and keeps the first
// OversizedPrefixLen bytes of the raw event being read, so that an event the
// sse.Reader rejects as too large can be shown to Handler.Oversized. The
// Reader reads ahead, so the tap may be an event ahead of it; with limits
// far above the read-ahead (4 KiB) the captured prefix is the rejected
// event's. big holds the prefix of the latest event whose raw size passed
// the limit.
type prefixTap struct {
	r      io.Reader
	limit  int
	cur    []byte // start of the raw event being read
	n      int    // raw bytes of that event so far
	lastLF bool   // the previous non-CR byte was LF
	big    []byte
}

func (t *prefixTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	for _, b := range p[:n] {
		switch {
		case b == '\r':
			continue // CRLF line ends look like LF ones
		case b == '\n' && t.lastLF:
			t.cur, t.n, t.lastLF = t.cur[:0], 0, false
			continue
		}
		t.lastLF = b == '\n'
		t.n++
		if len(t.cur) < OversizedPrefixLen {
			t.cur = append(t.cur, b)
		}
		if t.n == t.limit+1 {
			t.big = append(t.big[:0], t.cur...)
		}
	}
	return n, err
}

// isEventStream reports whether a response carries an SSE stream.
func isEventStream(mt string) bool { return mt == "text/event-stream" }

// ctxDone reports whether ctx has ended.
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }
