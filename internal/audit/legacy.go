package audit

import (
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file writes the lines of the requests of a legacy /messages POST.
// The POST is answered 202 at once and each request's reply travels on the
// session's SSE stream, so a request's line is started as the POST is
// accepted (Accepted) and written when its reply is put on that stream
// (Replied); a request refused by a limit has its line written as its
// refusal goes on the stream (RefusedOnStream).

// Pending is the line of one request of a legacy POST, waiting for its
// reply.
type Pending struct {
	l     line
	start time.Time
}

// Accepted starts the line of request m of legacy POST r to target,
// accepted (202) at start (Now).
func (a *Auditor) Accepted(r *http.Request, target Target, start time.Time, m *jsonrpc.Message) Pending {
	p := Pending{l: a.baseLine(r, target, start), start: start}
	p.l.Status = http.StatusAccepted
	a.describe(&p.l, m)
	return p
}

// Replied writes the line of p, whose reply, msg, is on the session's
// stream; a nil msg is a request the client cancelled.
func (a *Auditor) Replied(p *Pending, msg []byte) {
	l := p.l
	l.DurationMs = durationMs(a.now().Sub(p.start))
	l.BytesOut = int64(len(msg))
	l.Outcome = OutcomeOK
	if msg == nil {
		l.Outcome = OutcomeCancelled // the client cancelled it: no reply
	} else if len(msg) <= auditCapture {
		// A bigger reply is a result: errors are short, and parsing a
		// large reply only to learn that is not worth its cost.
		if rep, ok := a.parseReply(msg, nil); ok && rep.isError {
			l.Outcome, l.Code, l.denied = OutcomeError, rep.code, rep.denied
		}
	}
	a.emit(&l)
}

// RefusedOnStream writes the line of request m of legacy POST r to
// target, refused by a limit with outcome at now: its error, reply (code
// protocol.CodeServerError), went on the session's stream.
func (a *Auditor) RefusedOnStream(r *http.Request, target Target, now time.Time, m *jsonrpc.Message, outcome string, reply []byte) {
	l := a.baseLine(r, target, now)
	a.describe(&l, m)
	l.Status, l.Outcome, l.Code, l.BytesOut = http.StatusAccepted, outcome, protocol.CodeServerError, int64(len(reply))
	a.emit(&l)
}
