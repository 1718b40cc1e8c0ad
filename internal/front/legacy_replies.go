package front

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/admission"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file follows the requests of a legacy /messages POST past its 202:
// each request's reply travels on the session's SSE stream, so the POST
// counts against the limits (internal/limits), and its requests' audit
// lines are timed (internal/audit: Accepted, Replied), until the last of its replies is put on that
// stream. "Put on" is when the reply is queued on the session's stream,
// ready for its reader: the SSE writer of an attached client writes it
// at once, and a client between connections gets it when it is back (a
// client that never reads it is bounded by Backlogged, not by this).

// legacyPost is one legacy POST whose requests are being answered.
type legacyPost struct {
	audit   *audit.Auditor // nil: no audit log
	start   time.Time
	left    atomic.Int32 // requests without their reply yet
	release func()       // of the limits, once left is 0
}

// legacyOut is the out stream of one request of a legacy POST: its
// messages go on the session's stream; its reply, once there, ends the
// request's part of the POST. The mux calls Reply once per request.
type legacyOut struct {
	st   *session.Stream
	post *legacyPost
	line audit.Pending // with an audit log: the request's line, as it came
	done atomic.Bool
}

func (o *legacyOut) Send(msg []byte) { o.st.Send(msg) }

func (o *legacyOut) Reply(msg []byte) {
	o.st.Reply(msg)
	if o.done.Swap(true) {
		return
	}
	p := o.post
	if p.audit != nil {
		p.audit.Replied(&o.line, msg)
	}
	if p.left.Add(-1) == 0 {
		p.release()
	}
}

// handleLegacy hands msgs, the messages of one legacy POST admitted by
// the limits, to conn; release is called once all its requests have
// their replies on st.
func (h *Handler) handleLegacy(r *http.Request, name string, conn conn.Conn, st *session.Stream, msgs []jsonrpc.Message, release func()) {
	n := countRequests(msgs)
	if n == 0 || !admission.From(r.Context()).Limited() && h.cfg.Audit == nil {
		// Nothing to follow: the replies go straight to the stream.
		release()
		for i := range msgs {
			conn.Handle(r.Context(), &msgs[i], st)
		}
		return
	}
	p := &legacyPost{audit: h.cfg.Audit, start: time.Now(), release: release}
	if p.audit != nil {
		p.start = p.audit.Now()
	}
	p.left.Store(int32(n))
	for i := range msgs {
		m := &msgs[i]
		if m.Kind != jsonrpc.KindRequest {
			conn.Handle(r.Context(), m, st)
			continue
		}
		out := &legacyOut{st: st, post: p}
		if p.audit != nil {
			out.line = p.audit.Accepted(r, auditTarget(name), p.start, m)
		}
		conn.Handle(r.Context(), m, out)
	}
}

// refuseLegacy answers the requests of a legacy POST a limit refused with
// JSON-RPC errors on the session's stream st, each with its request's id
// (the refusal's Retry-After, in seconds, as the error's data
// "retryAfter"), and logs their audit lines. The caller answers the POST
// 202: see legacyPost for why.
func (h *Handler) refuseLegacy(r *http.Request, name string, st *session.Stream, msgs []jsonrpc.Message, ref *limits.Refusal) {
	retry := limits.RetryAfter(ref.Retry)
	prob := eras.Problem{Code: protocol.CodeServerError, Message: "mcpgate: " + ref.Msg, Data: []byte(`{"retryAfter":` + retry + `}`)}
	// Announced first, as legacyPost does, so a draining stream waits for
	// them.
	st.Expect(countRequests(msgs))
	now := time.Now()
	for i := range msgs {
		m := &msgs[i]
		if m.Kind != jsonrpc.KindRequest {
			continue // a refused notification has nothing to answer
		}
		reply := prob.AppendResponse(nil, m.Bytes(m.ID))
		st.Reply(reply)
		if a := h.cfg.Audit; a != nil {
			a.RefusedOnStream(r, auditTarget(name), now, m, ref.AuditOutcome(), reply)
		}
	}
}
