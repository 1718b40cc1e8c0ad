package audit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file follows one audited POST to its answer: the Exchange wraps the
// POST's ResponseWriter, counting the bytes out and keeping the head and
// tail of the body, and writes the POST's lines when Finish is called,
// with outcomes read from the replies it saw. What only the front knows
// it tells the Exchange: the messages it read (SetMessages), a limit's
// refusal (Refused), and that the lines are written elsewhere (Skip: a
// legacy POST's, written as their replies reach the session's stream).
// The methods of a nil *Exchange do nothing.

// auditCapture bounds what of a response is kept to find its outcome:
// its head, and its tail when longer.
const auditCapture = 64 << 10

// Exchange is the ResponseWriter of an audited POST: it counts the bytes
// out and finds the replies in the body. A JSON body written whole in its
// first Write (how the front writes one) is read for its replies there
// and nothing of it is kept; any other body (an SSE stream, a JSON body
// in pieces) has its head and tail kept and read at Finish. It is used by
// the POST's goroutine only.
type Exchange struct {
	http.ResponseWriter
	a      *Auditor
	start  time.Time
	r      *http.Request
	target Target
	status int
	out    int64
	head   []byte
	tail   []byte // the last auditCapture bytes past head, when over
	// whole: the body was one JSON value in the first Write, its replies
	// read into found (nothing kept); broken: more than whitespace came
	// after it, so the body is not valid JSON and has no replies.
	whole, broken bool
	found         []auditReply
	foundBuf      [1]auditReply // found's room for a single reply
	idBuf         [16]byte      // its id's room, when short
	msgs          []jsonrpc.Message
	// refused is the outcome of a POST a limit refused (Refused); "" else.
	refused string
	// skip: the lines of the POST's requests are logged elsewhere (a
	// legacy POST accepted).
	skip bool
}

// Begin starts the audit of a POST of r to target, answered on w: the
// caller answers on the Exchange and calls Finish once it is answered.
func (a *Auditor) Begin(w http.ResponseWriter, r *http.Request, target Target) *Exchange {
	return a.BeginIn(new(Exchange), w, r, target)
}

// BeginIn is Begin with the Exchange in x, memory the caller allocated
// with something else it needs per request (admission keeps it in the
// request's context, one allocation for both). x must be unused.
func (a *Auditor) BeginIn(x *Exchange, w http.ResponseWriter, r *http.Request, target Target) *Exchange {
	*x = Exchange{ResponseWriter: w, a: a, start: a.now(), r: r, target: target}
	return x
}

// SetMessages tells the messages the POST carries, as they are handled:
// one line per request. Without it (a POST refused before its body was
// read) the POST gets one line. A non-nil empty msgs: no line.
func (aw *Exchange) SetMessages(msgs []jsonrpc.Message) {
	if aw != nil {
		aw.msgs = msgs
	}
}

// Refused tells that a limit refused the POST, with outcome.
func (aw *Exchange) Refused(outcome string) {
	if aw != nil {
		aw.refused = outcome
	}
}

// Skip tells that the lines of the POST's requests are written elsewhere
// (Accepted and Replied: a legacy POST's requests).
func (aw *Exchange) Skip() {
	if aw != nil {
		aw.skip = true
	}
}

func (aw *Exchange) Unwrap() http.ResponseWriter { return aw.ResponseWriter }

func (aw *Exchange) WriteHeader(status int) {
	if aw.status == 0 {
		aw.status = status
	}
	aw.ResponseWriter.WriteHeader(status)
}

func (aw *Exchange) Write(b []byte) (int, error) {
	if aw.status == 0 {
		aw.status = http.StatusOK
	}
	first := aw.out == 0 && aw.head == nil
	n, err := aw.ResponseWriter.Write(b)
	aw.out += int64(n)
	b = b[:n]
	switch {
	case aw.whole:
		if len(bytes.TrimSpace(b)) > 0 {
			aw.broken = true
		}
		return n, err
	case first && n > 0 && !aw.streamed() && aw.readWhole(b):
		aw.whole = true
		return n, err
	}
	if room := auditCapture - len(aw.head); room > 0 {
		k := min(room, len(b))
		aw.head = append(aw.head, b[:k]...)
		b = b[k:]
	}
	if len(b) >= auditCapture {
		// Only its end can be the tail: a 1 MiB event is not copied whole
		// to keep its last bytes.
		aw.tail = append(aw.tail[:0], b[len(b)-auditCapture:]...)
	} else if len(b) > 0 {
		aw.tail = append(aw.tail, b...)
		if len(aw.tail) > auditCapture {
			aw.tail = append(aw.tail[:0], aw.tail[len(aw.tail)-auditCapture:]...)
		}
	}
	return n, err
}

// streamed reports whether the body is an SSE stream.
func (aw *Exchange) streamed() bool {
	return strings.HasPrefix(aw.Header().Get("Content-Type"), "text/event-stream")
}

// readWhole reads the replies of b, a JSON body's first Write, into found,
// and reports whether b was a whole JSON value (else found stays empty and
// the body is kept as it comes). The id of a single reply goes in idBuf
// when it fits: b is the caller's, not to be kept.
func (aw *Exchange) readWhole(b []byte) bool {
	if len(b) > auditCapture {
		// Longer than what is kept: its replies are not read (errors
		// are short, and parsing a large reply only to learn that is
		// not worth its cost), however it continues.
		return true
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		if !json.Valid(b) {
			return false
		}
		aw.found = aw.replies(b, nil)
		return true
	}
	rep, ok := aw.a.parseReply(b, aw.idBuf[:0])
	if !ok {
		// Not a whole response: maybe the first piece of one, read at
		// Finish with the rest (an object that is whole and no
		// response has no replies there either).
		return false
	}
	aw.found = append(aw.foundBuf[:0], rep)
	return true
}

// Finish logs the lines of the POST: one per request, or one for a POST
// refused before its messages were read.
func (aw *Exchange) Finish() {
	if aw == nil || aw.skip {
		return
	}
	base := aw.a.baseLine(aw.r, aw.target, aw.start)
	base.DurationMs = durationMs(aw.a.now().Sub(aw.start))
	base.Status, base.BytesOut = aw.status, aw.out
	replies := aw.body()
	if aw.msgs == nil {
		base.BytesIn = int(max(aw.r.ContentLength, 0))
		aw.outcome(&base, nil, replies)
		aw.a.emit(&base)
		return
	}
	for i := range aw.msgs {
		m := &aw.msgs[i]
		if m.Kind != jsonrpc.KindRequest {
			continue
		}
		l := base
		aw.a.describeIn(&l, m) // emitted here, while the POST's body lives
		aw.outcome(&l, l.ID, replies)
		aw.a.emit(&l)
	}
}

// outcome sets l's outcome: the limit's that refused the POST, the error
// its reply (by id) carries, else the HTTP status's.
func (aw *Exchange) outcome(l *line, id []byte, replies []auditReply) {
	l.Outcome = OutcomeOK
	if aw.refused != "" {
		defer func() { l.Outcome = aw.refused }()
	}
	for _, rep := range replies {
		if id == nil || bytes.Equal(rep.id, id) || len(replies) == 1 && !rep.hasID {
			if rep.isError {
				l.Outcome, l.Code, l.denied = OutcomeError, rep.code, rep.denied
			}
			return
		}
	}
	if aw.status >= 400 {
		l.Outcome = OutcomeError
	}
}

type auditReply struct {
	id      []byte
	hasID   bool
	isError bool
	code    int
	denied  bool // a policy's refusal (observe.go)
}

// body are the JSON-RPC replies of the body: those read as it was written
// (a whole JSON body), or those found in what was kept of it: a JSON body
// (object or array), or the data lines of an SSE stream.
func (aw *Exchange) body() []auditReply {
	if aw.whole {
		if aw.broken {
			return nil
		}
		return aw.found
	}
	if !aw.streamed() {
		if aw.tail == nil {
			return aw.replies(aw.head, nil)
		}
		return nil
	}
	var out []auditReply
	for _, part := range [][]byte{aw.head, aw.tail} {
		for line := range bytes.SplitSeq(part, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				out = aw.replies(data, out)
			}
		}
	}
	return out
}

// replies appends to out the replies of b, one JSON-RPC message or a
// batch of them.
func (aw *Exchange) replies(b []byte, out []auditReply) []auditReply {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil {
			for _, e := range arr {
				if rep, ok := aw.a.parseReply(e, nil); ok {
					out = append(out, rep)
				}
			}
		}
		return out
	}
	if rep, ok := aw.a.parseReply(b, nil); ok {
		out = append(out, rep)
	}
	return out
}

// parseReply reads a reply's id (appended to idBuf: a copy) and error
// code; false if b is not a response.
func (a *Auditor) parseReply(b, idBuf []byte) (auditReply, bool) {
	// The envelope's one validating pass (no allocation); only an error's
	// code and message are decoded.
	m, err := jsonrpc.Parse(b)
	if err != nil || m.Kind != jsonrpc.KindResponse {
		return auditReply{}, false
	}
	id := m.Bytes(m.ID)
	rep := auditReply{id: append(idBuf, id...), hasID: len(id) > 0 && string(id) != "null"}
	if m.IsError {
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		rep.isError, rep.code = true, e.Error.Code
		rep.denied = a.obs != nil && a.obs.denied != nil && a.obs.denied(e.Error.Code, e.Error.Message)
	}
	return rep, true
}
