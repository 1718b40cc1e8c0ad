package front

import (
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// This file writes subscriptions/listen of the stateless revision for a
// server of the session eras as an SSE stream: eras decides what goes on
// it (eras.OpenListen: the acknowledgement, the notifications of the
// connection's general stream it wants, tagged, and the end); the front
// holds the stream until the client leaves or the gateway drains.

// listen serves subscriptions/listen msg (id) on connection conn of
// session s: an SSE stream until the client leaves or the gateway drains.
func (h *Handler) listen(w http.ResponseWriter, r *http.Request, s *session.Session, conn conn.StatelessConn, msg *jsonrpc.Message, id []byte) {
	l, prob := eras.OpenListen(r.Context(), conn, msg)
	if prob != nil {
		writeProblem(w, id, prob)
		return
	}
	general := s.General()
	general.Attach()
	defer general.Detach()

	hdr := w.Header()
	hdr["Content-Type"] = sseContentType
	hdr["Cache-Control"] = noCache
	hdr["X-Accel-Buffering"] = noBuffering
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	buf, _ := sse.AppendEvent(nil, sse.Event{Event: "message", Data: l.Ack()})
	if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
		return
	}
	keep := time.NewTicker(h.cfg.KeepAlive)
	defer keep.Stop()
	var evs []session.Event
	after := general.Undelivered()
	for {
		var done bool
		evs, done, _ = general.Next(evs[:0], after)
		buf = buf[:0]
		for _, ev := range evs {
			after = ev.Seq
			if note, ok := l.Forward(ev.Data); ok {
				buf, _ = sse.AppendEvent(buf, sse.Event{Event: "message", Data: note})
			}
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
				return
			}
		}
		if done {
			endListen(w, l) // the session ended: shutdown
			return
		}
		select {
		case <-general.Wake():
		case <-r.Context().Done():
			return
		case <-h.drain:
			endListen(w, l)
			return
		case <-keep.C:
			if sse.WriteComment(w, "keep-alive") != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// endListen ends a listen the gateway ends (it shuts down) with the
// listen's result.
func endListen(w http.ResponseWriter, l *eras.TranslatedListen) {
	buf, _ := sse.AppendEvent(nil, sse.Event{Event: "message", Data: l.End()})
	_, _ = w.Write(buf)
}
