package front

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file writes the audit log (Config.Audit): one JSON line per client
// request POSTed to a target's /mcp URL (either era, and the stateless
// revision), written when its POST is answered; one per request POSTed to
// a legacy session's /messages URL, written when its reply is put on the
// session's SSE stream (legacy_replies.go); and one per request of any kind
// refused by authentication (outcome "unauthenticated", or "forbidden"
// for a 403). A request refused by a limit has outcome "rate_limited"
// (429) or "overloaded" (503, the global cap). Lines go through a bounded
// queue to one writer goroutine: a slow disk never holds a request up;
// when the queue is full, lines are dropped and counted. A write that
// fails loses its lines, counted too, and the writer carries on (see
// audit_writer.go); the next line written is preceded by
// {"time":...,"dropped":N}, the lines missing before it.

// AuditQueue is the number of lines an Auditor holds before it drops.
const AuditQueue = 4096

// Auditor writes audit lines to a writer (audit_writer.go). Its methods
// are safe for concurrent use; Close it when the Handler is closed.
type Auditor struct {
	arguments bool
	lines     chan []byte
	done      chan struct{}
	closeOnce sync.Once
	now       func() time.Time
	obs       *observer // Config.Observer (observe.go); nil: none

	// The writer's health (audit_writer.go).
	logger      *slog.Logger
	name        string       // the log's name in log lines (its file)
	dropped     atomic.Int64 // lines dropped: the queue was full
	lost        atomic.Int64 // lines lost: their write failed
	writeErrors atomic.Int64 // writes that failed
	errLog      logLimit     // "audit log write failed" lines
}

// AuditOptions are an Auditor's settings. The zero value is valid.
type AuditOptions struct {
	// Arguments puts the calls' arguments in the lines. Default false.
	Arguments bool
	// Logger gets the write errors (rate-limited) and the recoveries.
	// Default slog.Default().
	Logger *slog.Logger
	// Name names the log in those lines: its file. Default "".
	Name string
}

// NewAuditor returns an Auditor writing to w, with the calls' arguments
// when arguments is true.
func NewAuditor(w io.Writer, arguments bool) *Auditor {
	return NewAuditorWith(w, AuditOptions{Arguments: arguments})
}

// NewAuditorWith returns an Auditor writing to w as o says.
func NewAuditorWith(w io.Writer, o AuditOptions) *Auditor { return newAuditorWith(w, o, time.Now) }

// newAuditor is NewAuditor with clock now (tests).
func newAuditor(w io.Writer, arguments bool, now func() time.Time) *Auditor {
	return newAuditorWith(w, AuditOptions{Arguments: arguments}, now)
}

func newAuditorWith(w io.Writer, o AuditOptions, now func() time.Time) *Auditor {
	a := &Auditor{
		arguments: o.Arguments, lines: make(chan []byte, AuditQueue), done: make(chan struct{}), now: now,
		logger: o.Logger, name: o.Name, errLog: logLimit{every: auditErrorEvery},
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	go a.run(w)
	return a
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
	// HTTP is the request's method and path, on lines of requests refused
	// before their body was read (authentication).
	HTTP string `json:"http,omitempty"`
	// denied: its error is a policy's refusal (for the Observer only).
	denied bool
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
	// refused is the outcome of a POST a limit refused (refuse); "" else.
	refused string
	// skip: the lines of the POST's requests are logged elsewhere (a
	// legacy POST accepted: legacy_replies.go).
	skip bool
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
	if aw.skip {
		return
	}
	base := aw.a.baseLine(aw.r, aw.target, aw.start)
	base.DurationMs = durationMs(aw.a.now().Sub(aw.start))
	base.Status, base.BytesOut = aw.status, aw.out
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
		aw.a.describe(&l, m)
		aw.outcome(&l, l.ID, replies)
		aw.emit(&l)
	}
}

// baseLine is the start of a line of a request to target from r.
func (a *Auditor) baseLine(r *http.Request, target string, start time.Time) auditLine {
	l := auditLine{Principal: auditPrincipal(r), Kind: "server", Target: target}
	if a.lines != nil { // else observing only (observe.go): no line to date
		l.Time = start.UTC().Format(time.RFC3339Nano)
	}
	if name, ok := strings.CutPrefix(target, endpointKeyPrefix); ok {
		l.Kind, l.Target = "endpoint", name
	}
	return l
}

// describe fills in what of request m a line tells: method, id, size,
// and the name (and arguments) of what it uses. The line holds copies:
// it may outlive m's body (a legacy request's line is written when its
// reply comes).
func (a *Auditor) describe(l *auditLine, m *jsonrpc.Message) {
	l.Method = m.MethodName()
	l.ID = json.RawMessage(bytes.Clone(m.Bytes(m.ID)))
	l.BytesIn = len(m.Raw)
	switch l.Method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet, protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		if a.lines == nil {
			return // observing only: no Name, which costs decoding the params
		}
		p := paramsOf(m) // decoded: copies
		l.Name = p.Name
		if p.URI != "" {
			l.Name = p.URI
		}
		if a.arguments && len(p.Arguments) > 0 {
			l.Arguments = p.Arguments
		}
	}
}

func durationMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (aw *auditWriter) emit(l *auditLine) { aw.a.emit(l) }

func (a *Auditor) emit(l *auditLine) {
	if a.obs != nil {
		a.observe(l) // observe.go
	}
	if a.lines == nil {
		return // observing only: no audit log
	}
	b, err := json.Marshal(l)
	if err != nil {
		// Arguments that are not valid JSON cannot come (the message was
		// parsed), but a line must never be lost to them.
		l.Arguments = nil
		b, _ = json.Marshal(l)
	}
	a.log(append(b, '\n'))
}

// outcome sets l's outcome: the limit's that refused the POST, the error
// its reply (by id) carries, else the HTTP status's.
func (aw *auditWriter) outcome(l *auditLine, id []byte, replies []auditReply) {
	l.Outcome = "ok"
	if aw.refused != "" {
		defer func() { l.Outcome = aw.refused }()
	}
	for _, rep := range replies {
		if id == nil || bytes.Equal(rep.id, id) || len(replies) == 1 && !rep.hasID {
			if rep.isError {
				l.Outcome, l.Code, l.denied = "error", rep.code, rep.denied
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
	denied  bool // a policy's refusal (observe.go)
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
	// The envelope's one validating pass (no allocation); only an error's
	// code and message are decoded.
	m, err := jsonrpc.Parse(b)
	if err != nil || m.Kind != jsonrpc.KindResponse {
		return auditReply{}, false
	}
	id := m.Bytes(m.ID)
	rep := auditReply{id: bytes.Clone(id), hasID: len(id) > 0 && string(id) != "null"}
	if m.IsError {
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		rep.isError, rep.code = true, e.Error.Code
		rep.denied = isDenial(e.Error.Code, e.Error.Message)
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

// auditAuthRefusal logs a request to target refused by authentication
// with status. Its body was not read (nobody's request is not worth
// reading), so the line has no JSON-RPC method or id: it names the HTTP
// method and path instead, and the refused principal when the
// Authenticator knows it (an API key without the rights to the target).
func (h *Handler) auditAuthRefusal(r *http.Request, target string, start time.Time, status int, who *auth.Principal) {
	a := h.cfg.Audit
	if a == nil {
		return
	}
	l := a.baseLine(r, target, start)
	if who != nil {
		l.Principal = who.Kind + ":" + who.Name
	}
	l.HTTP = r.Method + " " + r.URL.Path
	l.DurationMs = durationMs(a.now().Sub(start))
	l.Status, l.BytesIn = status, int(max(r.ContentLength, 0))
	l.Outcome = "unauthenticated"
	if status == http.StatusForbidden {
		l.Outcome = "forbidden"
	}
	l.Code = protocol.CodeInvalidRequest
	a.emit(&l)
}
