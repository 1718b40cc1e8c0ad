package front

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// This file makes the resumable streams of portable sessions resumable on
// every replica (docs/deployment.md, "Running more than one replica").
// When the reply to a POST of a portable session becomes an SSE stream
// (respond.go: past ReplyWait, or at its first related message), the
// stream is mirrored into the cluster's store: who writes it, the ids of
// its requests, then its events as they are appended, written off the
// reply path (the store queues them; a full queue drops them). A reply
// faster than ReplyWait costs the store nothing.
//
// A GET whose Last-Event-ID names a stream this replica does not hold
// goes to the replica that wrote it while that one lives (forward.go,
// one hop); when it is gone, the events after the Last-Event-ID are
// replayed from the store, every request of the stream left without a
// final reply is answered with an error (errReplicaLost), and the stream
// ends: exactly one answer per request.
//
// Event ids keep their form "<stream>-<seq>"; with the cluster on, the
// stream number carries its replica: the upper 32 bits are a random
// number each Handler draws when it starts (streamBase), the lower ones
// count the session's streams in that replica. Two replicas serving one
// session thus never number a stream alike (but for a 1 in 2^32 draw),
// nor does a replica restarted under the same instance id (a container
// restarted in its pod keeps its pod's UID), and a replica tells its own
// streams from others' without the store.

// openStreamTTL is how long the store keeps a stream whose requests are
// not all answered, from its last event: a request that runs longer with
// no message at all cannot be resumed on another replica after its
// replica died.
const openStreamTTL = time.Hour

// errReplicaLost answers a request whose replica died before its reply
// reached the store.
const errReplicaLost = "mcpgate: the replica serving this request stopped; its reply was lost"

// newStreamBase draws a replica's stream base (see above): never 0, so
// that its streams are never taken for a replica's without the cluster.
func newStreamBase() uint64 {
	var b [4]byte
	for {
		_, _ = rand.Read(b[:])
		if tag := binary.BigEndian.Uint32(b[:]); tag != 0 {
			return uint64(tag) << 32
		}
	}
}

// numberStreams makes session s, just made or resumed here, number its
// streams from this replica's base.
func (h *Handler) numberStreams(s *session.Session) {
	if h.cfg.Cluster != nil {
		s.NumberStreamsFrom(h.streamBase)
	}
}

// shareStream mirrors POST stream st of session s into the cluster's
// store, if s is portable: the events in pending (already taken from st),
// then the rest of st's as they come. ans holds the POST's requests.
func (h *Handler) shareStream(s *session.Session, st *session.Stream, pending []session.Event, ans *answers) {
	cl := h.cfg.Cluster
	if cl == nil || ans == nil || s.Handoff() == nil || s.Legacy() {
		return
	}
	requests := make([][]byte, 0, ans.reqs)
	for i := range ans.msgs {
		if m := &ans.msgs[i]; m.Kind == jsonrpc.KindRequest {
			requests = append(requests, bytes.Clone(m.Bytes(m.ID))) // the body's buffer goes back to its pool
		}
	}
	sid, stream := s.ID, st.ID()
	if !cl.OpenStream(sid, stream, requests, openStreamTTL) {
		return // no record: a resume elsewhere finds none, and gets 404
	}
	for _, ev := range pending {
		if ev.Seq != 0 {
			cl.AppendEvent(sid, stream, ev, openStreamTTL)
		}
	}
	grace := max(h.cfg.ResumeGrace, session.DefaultResumeGrace)
	st.Mirror(seqOf(pending), func(ev session.Event, complete bool) {
		ttl := openStreamTTL
		if complete {
			ttl = grace
		}
		cl.AppendEvent(sid, stream, ev, ttl)
	})
}

// resumeElsewhere answers a GET resuming, after seq `after`, stream
// `stream` of portable session s, which this replica does not hold: it
// forwards it to the stream's writer if that one lives, else replays the
// stream from the cluster's store. It reports false, having written
// nothing, when the store knows no such stream of another replica's.
func (h *Handler) resumeElsewhere(w http.ResponseWriter, r *http.Request, s *session.Session, stream, after uint64) bool {
	cl := h.cfg.Cluster
	if cl == nil || stream == 0 || s.Handoff() == nil || stream&^0xffffffff == h.streamBase {
		return false // the standalone stream, or one of this replica's that is gone
	}
	rec, err := cl.Events(r.Context(), s.ID, stream, after)
	if err != nil || rec == nil {
		return false
	}
	// A forwarded GET is never forwarded again: the replica at the
	// writer's address is another process now, and replays. So does a
	// replica whose instance id the writer had: it is the writer's next
	// life.
	if r.Header.Get(hopHeader) == "" && rec.Instance != cl.Instance() {
		if alive, known := cl.Alive(rec.Instance); alive || !known {
			if h.forward(w, r, rec.Advertise) { // forward.go
				return true
			}
		}
	}
	h.replay(w, s, stream, rec)
	return true
}

// replay writes, as one SSE response, what the store kept of stream
// after rec.After, then an error for each request left without a reply,
// and ends the stream: its writer is gone, so nothing more will come.
// The errors have no event id: a client resuming from one would skip
// nothing, and one resuming before it gets it again.
func (h *Handler) replay(w http.ResponseWriter, s *session.Session, stream uint64, rec *session.Record) {
	s.Begin()
	defer s.End(time.Now())
	idField := func(dst []byte, seq uint64) []byte { return appendID(dst, stream, seq) }
	bp := getBuf()
	defer putBuf(bp)
	buf := sse.AppendRetry(*bp, h.cfg.Retry)
	for _, ev := range rec.Events {
		buf = appendEvent(buf, ev, idField)
	}
	lost := rec.Unanswered()
	for _, id := range lost {
		buf = appendEvent(buf, session.Event{Final: true, Data: jsonrpc.ErrorResponse(id, protocol.CodeServerError, errReplicaLost)}, idField)
	}
	if len(lost) > 0 {
		h.log.Warn("a stream's replica stopped before the replies of its requests were stored; they were answered with an error",
			"session", logID(s.ID), "writer", rec.Instance, "requests", len(lost))
	}
	hdr := w.Header()
	hdr["Content-Type"] = sseContentType
	hdr["Cache-Control"] = noCache
	hdr["X-Accel-Buffering"] = noBuffering
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf)
	*bp = buf[:0]
}
