package front

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file answers a POST once its requests are handed on: one JSON body
// while only final replies come, an SSE stream from the first other
// message or when a resumable session's reply is slow.

// timerPool holds stopped timers for Config.ReplyWait: one per POST otherwise.
var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// respond writes the replies of a POST: one JSON body (an array for a
// batch) when the final replies are the first messages for it, the simplest
// and fastest answer the spec allows; an SSE stream from the first related
// message (progress, a log message, a server request) on. A session of
// 2025-11-25 or later, which can resume a stream with Last-Event-ID, also
// gets the stream when its replies take longer than ReplyWait, so a long
// call survives a dropped connection; older sessions wait in JSON for as
// long as the request takes. It returns false if the client left before it
// got any event id to resume from: nobody will ever read the replies.
//
// A request whose final reply a closed stream never got (its session ended
// and its connection did not answer it) is answered here with an error, as
// recorded by ans.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request, s *session.Session, st *session.Stream, batch bool, ans *answers) bool {
	var wait <-chan time.Time
	// A session of 2025-11-25 or later switches a slow reply to a stream it
	// can resume. A stateless request cannot resume, and the status of its
	// answer (404, 400 for the server's refusals) can only be chosen
	// before a stream starts: it waits for its first message.
	if protocol.PrimesStreams(s.Version()) {
		t := timerPool.Get().(*time.Timer)
		t.Reset(h.cfg.ReplyWait)
		defer func() {
			t.Stop() // since Go 1.23 a stopped timer's channel holds nothing stale
			timerPool.Put(t)
		}()
		wait = t.C
	}
	// Room for the events of the common POST (one reply) on the stack: the
	// buffer is handed on only to calls that do not keep it.
	var stack [2]session.Event
	evs := stack[:0]
	for {
		var done bool
		// ErrLost is no matter here: only non-final events are ever
		// dropped from a request's stream, and the first one seen switches
		// to SSE.
		evs, done, _ = st.Next(evs, seqOf(evs))
		for _, ev := range evs {
			if !ev.Final && ev.Data != nil {
				h.sse(w, r, s, st, evs, 0, ans)
				return true
			}
		}
		if done {
			if !st.Complete() {
				for _, ev := range evs {
					ans.saw(ev)
				}
				for _, e := range ans.missing(closeReason(s)) {
					evs = append(evs, session.Event{Final: true, Data: e})
				}
			}
			if protocol.IsStateless(s.Version()) {
				writeStatelessJSON(w, evs)
			} else {
				writeJSON(w, evs, batch)
			}
			s.Forget(st)
			return true
		}
		select {
		case <-st.Wake():
		case <-wait:
			h.sse(w, r, s, st, evs, 0, ans)
			return true
		case <-r.Context().Done():
			s.Forget(st)
			return false
		}
	}
}

func seqOf(evs []session.Event) uint64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

func writeJSON(w http.ResponseWriter, evs []session.Event, batch bool) {
	if !batch && len(evs) == 1 && evs[0].Data != nil {
		// The common case: one reply, written as it is (net/http copies
		// it; the stream keeps the bytes for replay).
		writeBody(w, evs[0].Data)
		return
	}
	var body []byte
	n := 0
	for _, ev := range evs {
		if ev.Data == nil {
			continue // cancelled by the client: no reply
		}
		if batch {
			if n == 0 {
				body = append(body, '[')
			} else {
				body = append(body, ',')
			}
		}
		body = append(body, ev.Data...)
		n++
	}
	if n == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if batch {
		body = append(body, ']')
	}
	writeBody(w, body)
}

// writeBody answers with one JSON body. A body too big for net/http's
// buffer gets its Content-Length here, so it is not sent chunked.
func writeBody(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if len(body) > 2048 {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	_, _ = w.Write(body)
}
