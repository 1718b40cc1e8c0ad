package front

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// Header values shared by every response, assigned without allocating;
// net/http only reads them.
var (
	sseContentType  = []string{"text/event-stream"}
	jsonContentType = []string{"application/json"}
	noCache         = []string{"no-cache"}
	noBuffering     = []string{"no"} // tells nginx-style proxies not to buffer the stream
)

// reattachWait bounds how long a GET waits for the previous reader of its
// stream to go (a connection that broke but whose handler has not noticed
// yet) before it gets 409.
const reattachWait = 2 * time.Second

// get opens the session's standalone stream, or resumes the stream a
// Last-Event-ID names.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, name string) {
	if !accepts(r.Header.Get("Accept"), "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, protocol.CodeInvalidRequest, "mcpgate: Accept must list text/event-stream")
		return
	}
	s := h.lookup(w, r, name)
	if s == nil {
		return
	}
	st, after := s.General(), uint64(0)
	last := r.Header.Get("Last-Event-ID")
	resumed := last != ""
	if resumed {
		id, seq, ok := session.ParseEventID(last)
		if !ok {
			writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: malformed Last-Event-ID")
			return
		}
		if st = s.Stream(id); st == nil {
			if h.resumeElsewhere(w, r, s, id, seq) { // sharedstreams.go: another replica's
				return
			}
			writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, "mcpgate: the stream of that Last-Event-ID is gone")
			return
		}
		if !st.Issued(seq) {
			// Resumed from there it would send nothing before an event
			// of that number: the replies of its requests never.
			writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, "mcpgate: no event of that Last-Event-ID was sent on its stream")
			return
		}
		after = seq
	} else {
		after = st.Undelivered()
	}
	// A client that lost its connection may come back before its old
	// handler noticed: give that handler time to let go.
	if !st.AttachWait(r.Context(), reattachWait) {
		writeError(w, http.StatusConflict, protocol.CodeInvalidRequest, "mcpgate: that stream is already open")
		return
	}
	defer st.Detach()
	if st == s.General() {
		if held := s.GeneralHeld(); held != nil {
			// A resumed session's client stream is here now: its
			// connection takes the server's stream (before Detach lets
			// the client's next GET in, it lets go of it).
			held(true)
			defer held(false)
		}
	}
	s.Begin()
	defer func() { s.End(time.Now()) }()
	if resumed {
		h.resumeSSE(w, r, s, st, after)
		return
	}
	h.sse(w, r, s, st, nil, after, nil)
}

// withGeneralHeld returns ctx with the registration of the function
// telling a resumed session's connection that the client's standalone
// stream is held here (conn.WithGeneralHeld), when the cluster is on: get
// calls it as the stream attaches and detaches.
func (h *Handler) withGeneralHeld(ctx context.Context, s *session.Session) context.Context {
	if h.cfg.Cluster == nil {
		return ctx
	}
	return conn.WithGeneralHeld(ctx, s.SetGeneralHeld)
}

// resumeSSE serves stream st from the event after `after`, the one a
// client's Last-Event-ID named: strictly the events after it. Unlike a new
// stream it gets no priming event: one would bear the named event's id
// again, and the client has that event already. The retry time comes in a
// block of its own, which dispatches no event (an empty "data:" line would
// be an event of empty data, which a client of a session older than
// 2025-11-25 parses as a message and fails on).
func (h *Handler) resumeSSE(w http.ResponseWriter, r *http.Request, s *session.Session, st *session.Stream, after uint64) {
	bp := getBuf()
	defer putBuf(bp)
	*bp = sse.AppendRetry(*bp, h.cfg.Retry)
	h.stream(w, r, s, st, nil, after, bp, nil, func(dst []byte, seq uint64) []byte { return appendID(dst, st.ID(), seq) })
}

// sse serves stream st as Server-Sent Events: first the events in pending
// (already taken from st), then whatever follows `after`, until the
// stream's requests all have their replies, the client leaves, or (for the
// standalone stream) the gateway drains. Once the status line is out, no
// error can change it: a failed write ends the stream. ans (nil for a GET)
// records the POST's requests, answered here if the stream closes without
// their replies.
func (h *Handler) sse(w http.ResponseWriter, r *http.Request, s *session.Session, st *session.Stream, pending []session.Event, after uint64, ans *answers) {
	bp := getBuf()
	defer putBuf(bp)
	if protocol.IsStateless(s.Version()) {
		// Nothing can resume: no priming event, no event ids.
		h.stream(w, r, s, st, pending, after, bp, ans, func(dst []byte, _ uint64) []byte { return dst })
		return
	}
	h.shareStream(s, st, pending, ans) // sharedstreams.go: resumable on the other replicas
	if protocol.PrimesStreams(s.Version()) {
		*bp = appendID(*bp, st.ID(), after)
		*bp, _ = sse.AppendEvent(*bp, sse.Event{Retry: h.cfg.Retry})
	}
	h.stream(w, r, s, st, pending, after, bp, ans, func(dst []byte, seq uint64) []byte { return appendID(dst, st.ID(), seq) })
}

// stream writes the SSE stream of sse and of the legacy transport: the
// preamble already in *bp (a priming or endpoint event), then st's events
// with id fields from idField. *bp is its write buffer.
//
// A reader that fell behind its stream's bounded buffer goes on with a gap:
// only progress and log messages (or events it already took) are dropped,
// never a final reply it has not taken. A legacy session's stream outlives
// Drain until the requests it carries are answered.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, s *session.Session, st *session.Stream, pending []session.Event, after uint64, bp *[]byte, ans *answers, idField func(dst []byte, seq uint64) []byte) {
	hdr := w.Header()
	hdr["Content-Type"] = sseContentType
	hdr["Cache-Control"] = noCache
	hdr["X-Accel-Buffering"] = noBuffering
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	// Events go out in as few writes as possible: the preamble and the
	// events already there share one write, and the last one is not flushed
	// (returning from the handler sends it with the end of the response).
	buf := *bp
	defer func() { *bp = buf[:0] }() // keep what the buffer grew to
	var err error
	for _, ev := range pending {
		if buf, err = writeEvent(w, buf, ev, idField); err != nil {
			return
		}
		ans.saw(ev)
		after = max(after, ev.Seq) // an error of the handler's own has seq 0
	}
	var general <-chan struct{}
	if st.ID() == 0 {
		general = h.drain
	}
	draining := false // a legacy stream after Drain: ends once settled
	warned := false
	var keep <-chan time.Time // made on the first wait: most POST streams never wait
	var stack [4]session.Event
	evs := stack[:0]
	for {
		evs, done, lost := st.Next(evs[:0], after)
		if lost != nil && !warned {
			warned = true
			h.log.Warn("SSE stream fell behind its buffer; events were dropped", "session", logID(s.ID), "stream", st.ID(), "dropped", st.Dropped())
		}
		for _, ev := range evs {
			if buf, err = writeEvent(w, buf, ev, idField); err != nil {
				return
			}
			ans.saw(ev)
			after = ev.Seq
		}
		if done && !st.Complete() {
			for _, e := range ans.missing(closeReason(s)) {
				buf, _ = sse.AppendEvent(buf, sse.Event{Event: "message", Data: e})
			}
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				return
			}
			buf = buf[:0]
		}
		if done {
			if st.Complete() {
				// The write above is not flushed: it leaves with the end of
				// the response, and a connection breaking right then loses
				// it. The stream stays resumable for the grace.
				s.Finish(st, time.Now())
			}
			return
		}
		if draining && st.Settled() {
			return
		}
		if rc.Flush() != nil {
			return
		}
		if keep == nil {
			t := time.NewTicker(h.cfg.KeepAlive)
			defer t.Stop()
			keep = t.C
		}
		select {
		case <-st.Wake():
		case <-r.Context().Done():
			return
		case <-general:
			if !s.Legacy() {
				return
			}
			// Its replies come on this stream: keep it until they are out
			// (Close ends the session, answering what is left).
			draining, general = true, nil
		case <-keep:
			if err := sse.WriteComment(w, "keep-alive"); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}

// bufPool holds the buffers SSE events are formatted into (w.Write copies).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(bp *[]byte) {
	if cap(*bp) <= 256<<10 {
		*bp = (*bp)[:0]
		bufPool.Put(bp)
	}
}

// appendEvent appends ev as an SSE message event; a nil message (a request
// the client cancelled) takes no room. An event of seq 0 (an error the
// handler wrote itself, not in the stream) gets no id: a client resuming
// from it would be sent the stream again from its start.
func appendEvent(buf []byte, ev session.Event, idField func(dst []byte, seq uint64) []byte) []byte {
	if ev.Data == nil {
		return buf
	}
	if ev.Seq != 0 {
		buf = idField(buf, ev.Seq)
	}
	// The event type is a constant, so AppendEvent cannot fail.
	buf, _ = sse.AppendEvent(buf, sse.Event{Event: "message", Data: ev.Data})
	return buf
}

// directEvent is the size from which an event's data is written as it is
// rather than copied into the write buffer.
const directEvent = 64 << 10

// writeEvent is appendEvent for a stream written to w: the data of a big
// event (a 1 MiB reply) goes to w as it is, after what buf held and the
// event's fields, instead of being copied into buf first; its end stays
// in buf for the next write. Data with a line break takes appendEvent's
// way, which splits it into data lines (a reply the gateway spliced has
// none). It returns buf, emptied or grown, and w's error.
func writeEvent(w io.Writer, buf []byte, ev session.Event, idField func(dst []byte, seq uint64) []byte) ([]byte, error) {
	if len(ev.Data) < directEvent || bytes.IndexByte(ev.Data, '\n') >= 0 || bytes.IndexByte(ev.Data, '\r') >= 0 {
		return appendEvent(buf, ev, idField), nil
	}
	if ev.Seq != 0 {
		buf = idField(buf, ev.Seq)
	}
	buf = append(buf, "event: message\ndata: "...)
	if _, err := w.Write(buf); err != nil {
		return buf[:0], err
	}
	if _, err := w.Write(ev.Data); err != nil {
		return buf[:0], err
	}
	return append(buf[:0], "\n\n"...), nil
}

// appendID appends the id field of event seq on stream: the ids are built
// in place, not as strings, because every event has one.
func appendID(dst []byte, stream, seq uint64) []byte {
	dst = append(dst, "id: "...)
	dst = session.AppendEventID(dst, stream, seq)
	return append(dst, '\n')
}
