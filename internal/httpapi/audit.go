package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file writes the audit log (Config.Audit): one JSON line per client
// request POSTed to a target's /mcp URL (either era), written when its
// POST is answered. Lines go through a bounded queue to one writer
// goroutine: a slow disk never holds a request up; when the queue is
// full, lines are dropped and counted, and the next line written is
// preceded by {"time":...,"dropped":N}.

// AuditQueue is the number of lines an Auditor holds before it drops.
const AuditQueue = 4096

// Auditor writes audit lines to a writer. Its methods are safe for
// concurrent use; Close it when the Handler is closed.
type Auditor struct {
	arguments bool
	lines     chan []byte
	dropped   atomic.Int64
	done      chan struct{}
	closeOnce sync.Once
	now       func() time.Time
}

// NewAuditor returns an Auditor writing to w, with the calls' arguments
// when arguments is true.
func NewAuditor(w io.Writer, arguments bool) *Auditor {
	a := &Auditor{arguments: arguments, lines: make(chan []byte, AuditQueue), done: make(chan struct{}), now: time.Now}
	go a.run(w)
	return a
}

// Dropped returns how many lines were dropped because the queue was full.
func (a *Auditor) Dropped() int64 { return a.dropped.Load() }

// Close writes the lines queued and stops; lines logged after are
// dropped.
func (a *Auditor) Close() {
	a.closeOnce.Do(func() { close(a.lines) })
	<-a.done
}

func (a *Auditor) run(w io.Writer) {
	defer close(a.done)
	bw := bufio.NewWriterSize(w, 64<<10)
	var reported int64
	for line := range a.lines {
		if d := a.dropped.Load(); d > reported {
			b, _ := json.Marshal(struct {
				Time    string `json:"time"`
				Dropped int64  `json:"dropped"`
			}{a.now().UTC().Format(time.RFC3339Nano), d - reported})
			_, _ = bw.Write(append(b, '\n'))
			reported = d
		}
		_, _ = bw.Write(line)
		if len(a.lines) == 0 {
			_ = bw.Flush()
		}
	}
	_ = bw.Flush()
}

// log queues one line, or drops it when the queue is full.
func (a *Auditor) log(line []byte) {
	defer func() {
		// Logged after Close: dropped.
		if recover() != nil {
			a.dropped.Add(1)
		}
	}()
	select {
	case a.lines <- line:
	default:
		a.dropped.Add(1)
	}
}

// auditLine is one line of the audit log.
type auditLine struct {
	Time       string          `json:"time"`
	Principal  string          `json:"principal"`
	Kind       string          `json:"kind"`
	Target     string          `json:"target"`
	Method     string          `json:"method"`
	Name       string          `json:"name,omitempty"`
	ID         json.RawMessage `json:"id,omitempty"`
	DurationMs float64         `json:"durationMs"`
	Status     int             `json:"status"`
	Outcome    string          `json:"outcome"`
	Code       int             `json:"code,omitempty"`
	BytesIn    int             `json:"bytesIn"`
	BytesOut   int64           `json:"bytesOut"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
}

// auditCapture bounds what of a response is kept to find its outcome:
// its head, and its tail when longer.
const auditCapture = 64 << 10

// auditWriter is the ResponseWriter of an audited POST: it counts the
// bytes out and keeps the head and tail of the body.
type auditWriter struct {
	http.ResponseWriter
	a      *Auditor
	start  time.Time
	r      *http.Request
	target string
	status int
	out    int64
	head   []byte
	tail   []byte // the last auditCapture bytes past head, when over
	msgs   []jsonrpc.Message
}

func (a *Auditor) begin(w http.ResponseWriter, r *http.Request, target string) *auditWriter {
	return &auditWriter{ResponseWriter: w, a: a, start: a.now(), r: r, target: target}
}

func (aw *auditWriter) Unwrap() http.ResponseWriter { return aw.ResponseWriter }

func (aw *auditWriter) WriteHeader(status int) {
	if aw.status == 0 {
		aw.status = status
	}
	aw.ResponseWriter.WriteHeader(status)
}

func (aw *auditWriter) Write(b []byte) (int, error) {
	if aw.status == 0 {
		aw.status = http.StatusOK
	}
	n, err := aw.ResponseWriter.Write(b)
	aw.out += int64(n)
	b = b[:n]
	if room := auditCapture - len(aw.head); room > 0 {
		k := min(room, len(b))
		aw.head = append(aw.head, b[:k]...)
		b = b[k:]
	}
	if len(b) > 0 {
		aw.tail = append(aw.tail, b...)
		if len(aw.tail) > auditCapture {
			aw.tail = append(aw.tail[:0], aw.tail[len(aw.tail)-auditCapture:]...)
		}
	}
	return n, err
}

// finish logs the lines of the POST: one per request, or one for a POST
// refused before its messages were read.
func (aw *auditWriter) finish() {
	now := aw.a.now()
	base := auditLine{
		Time:       aw.start.UTC().Format(time.RFC3339Nano),
		Principal:  auditPrincipal(aw.r),
		Kind:       "server",
		Target:     aw.target,
		DurationMs: float64(now.Sub(aw.start).Microseconds()) / 1000,
		Status:     aw.status,
		BytesOut:   aw.out,
	}
	if name, ok := strings.CutPrefix(aw.target, endpointKeyPrefix); ok {
		base.Kind, base.Target = "endpoint", name
	}
	replies := aw.replies()
	if aw.msgs == nil {
		base.BytesIn = int(max(aw.r.ContentLength, 0))
		aw.outcome(&base, nil, replies)
		aw.emit(&base)
		return
	}
	for i := range aw.msgs {
		m := &aw.msgs[i]
		if m.Kind != jsonrpc.KindRequest {
			continue
		}
		l := base
		l.Method = m.MethodName()
		l.ID = json.RawMessage(m.Bytes(m.ID))
		l.BytesIn = len(m.Raw)
		switch l.Method {
		case "tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe":
			p := paramsOf(m)
			l.Name = p.Name
			if p.URI != "" {
				l.Name = p.URI
			}
			if aw.a.arguments && len(p.Arguments) > 0 {
				l.Arguments = p.Arguments
			}
		}
		aw.outcome(&l, l.ID, replies)
		aw.emit(&l)
	}
}

func (aw *auditWriter) emit(l *auditLine) {
	b, err := json.Marshal(l)
	if err != nil {
		// Arguments that are not valid JSON cannot come (the message was
		// parsed), but a line must never be lost to them.
		l.Arguments = nil
		b, _ = json.Marshal(l)
	}
	aw.a.log(append(b, '\n'))
}

// outcome sets l's outcome: the error its reply (by id) carries, else
// the HTTP status's.
func (aw *auditWriter) outcome(l *auditLine, id []byte, replies []auditReply) {
	l.Outcome = "ok"
	for _, rep := range replies {
		if id == nil || bytes.Equal(rep.id, id) || len(replies) == 1 && !rep.hasID {
			if rep.isError {
				l.Outcome, l.Code = "error", rep.code
			}
			return
		}
	}
	if aw.status >= 400 {
		l.Outcome = "error"
	}
}

type auditReply struct {
	id      []byte
	hasID   bool
	isError bool
	code    int
}

// replies are the JSON-RPC replies found in what was kept of the body:
// a JSON body (object or array), or the data lines of an SSE stream.
func (aw *auditWriter) replies() []auditReply {
	var out []auditReply
	add := func(b []byte) {
		b = bytes.TrimSpace(b)
		if len(b) > 0 && b[0] == '[' {
			var arr []json.RawMessage
			if json.Unmarshal(b, &arr) == nil {
				for _, e := range arr {
					if rep, ok := parseReply(e); ok {
						out = append(out, rep)
					}
				}
			}
			return
		}
		if rep, ok := parseReply(b); ok {
			out = append(out, rep)
		}
	}
	ct := aw.Header().Get("Content-Type")
	if !strings.HasPrefix(ct, "text/event-stream") {
		if aw.tail == nil {
			add(aw.head)
		}
		return out
	}
	for _, part := range [][]byte{aw.head, aw.tail} {
		for line := range bytes.SplitSeq(part, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				add(data)
			}
		}
	}
	return out
}

// parseReply reads a reply's id and error code; false if b is not a
// response.
func parseReply(b []byte) (auditReply, bool) {
	var m struct {
		ID     json.RawMessage  `json:"id"`
		Result *json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
		Method *string `json:"method"`
	}
	if json.Unmarshal(b, &m) != nil || m.Method != nil || m.Result == nil && m.Error == nil {
		return auditReply{}, false
	}
	rep := auditReply{id: m.ID, hasID: len(m.ID) > 0 && string(m.ID) != "null"}
	if m.Error != nil {
		rep.isError, rep.code = true, m.Error.Code
	}
	return rep, true
}

// auditPrincipal names r's principal: "KIND:NAME", or "" for none.
func auditPrincipal(r *http.Request) string {
	p := Principal(r.Context())
	if p == nil {
		return ""
	}
	return p.Kind + ":" + p.Name
}
