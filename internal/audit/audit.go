package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file writes the audit log: one JSON line per client request POSTed
// to a target's /mcp URL (either era, and the stateless revision), written
// when its POST is answered (exchange.go); one per request POSTed to a
// legacy session's /messages URL, written when its reply is put on the
// session's SSE stream (legacy.go); and one per request of any kind
// refused by authentication (outcome "unauthenticated", or "forbidden"
// for a 403). A request refused by a limit has outcome "rate_limited"
// (429) or "overloaded" (503, the global cap). Lines go through a bounded
// queue to one writer goroutine: a slow disk never holds a request up;
// when the queue is full, lines are dropped and counted. A write that
// fails loses its lines, counted too, and the writer carries on (see
// writer.go); the next line written is preceded by
// {"time":...,"dropped":N}, the lines missing before it.

// Queue is the number of lines an Auditor holds before it drops.
const Queue = 4096

// Auditor writes audit lines to a writer (writer.go). Its methods are
// safe for concurrent use; Close it when the HTTP front is closed.
type Auditor struct {
	arguments bool
	lines     chan []byte
	done      chan struct{}
	closeOnce sync.Once
	now       func() time.Time
	obs       *observer // the Observer (observe.go); nil: none

	// The writer's health (writer.go).
	logger      *slog.Logger
	name        string          // the log's name in log lines (its file)
	dropped     atomic.Int64    // lines dropped: the queue was full
	lost        atomic.Int64    // lines lost: their write failed
	writeErrors atomic.Int64    // writes that failed
	errLog      limits.LogLimit // "audit log write failed" lines
}

// Options are an Auditor's settings. The zero value is valid.
type Options struct {
	// Arguments puts the calls' arguments in the lines. Default false.
	Arguments bool
	// Logger gets the write errors (rate-limited) and the recoveries.
	// Default slog.Default().
	Logger *slog.Logger
	// Name names the log in those lines: its file. Default "".
	Name string
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
}

// New returns an Auditor writing to w, with the calls' arguments when
// arguments is true.
func New(w io.Writer, arguments bool) *Auditor {
	return NewWith(w, Options{Arguments: arguments})
}

// NewWith returns an Auditor writing to w as o says.
func NewWith(w io.Writer, o Options) *Auditor {
	a := &Auditor{
		arguments: o.Arguments, lines: make(chan []byte, Queue), done: make(chan struct{}), now: o.Now,
		logger: o.Logger, name: o.Name, errLog: limits.LogLimit{Every: errorEvery},
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	go a.run(w)
	return a
}

// Now is the Auditor's clock: the start of a request's line.
func (a *Auditor) Now() time.Time { return a.now() }

// line is one line of the audit log.
type line struct {
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

// Target is what a request asks: a server or an endpoint merging several.
type Target struct {
	Kind string // "server" or "endpoint"
	Name string
}

// baseLine is the start of a line of a request to target from r.
func (a *Auditor) baseLine(r *http.Request, target Target, start time.Time) line {
	l := line{Principal: principal(r), Kind: target.Kind, Target: target.Name}
	if a.lines != nil { // else observing only (observe.go): no line to date
		l.Time = start.UTC().Format(time.RFC3339Nano)
	}
	return l
}

// describe fills in what of request m a line tells: method, id, size,
// and the name (and arguments) of what it uses. The line holds copies:
// it may outlive m's body (a legacy request's line is written when its
// reply comes).
func (a *Auditor) describe(l *line, m *jsonrpc.Message) {
	a.describeIn(l, m)
	l.ID = json.RawMessage(bytes.Clone(l.ID))
}

// describeIn is describe of a line that does not outlive m's body: its id
// is m's bytes.
func (a *Auditor) describeIn(l *line, m *jsonrpc.Message) {
	l.Method = m.MethodName()
	l.ID = json.RawMessage(m.Bytes(m.ID))
	l.BytesIn = len(m.Raw)
	switch l.Method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet, protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		if a.lines == nil {
			return // observing only: no Name, which costs decoding the params
		}
		p, err := conn.ReadParams(m) // decoded: copies
		if err != nil {
			return // ambiguous params: the policy refuses them
		}
		l.Name = p.Name
		if p.URI != "" {
			l.Name = p.URI
		}
		if a.arguments && len(p.Arguments) > 0 {
			l.Arguments = json.RawMessage(p.Arguments)
		}
	}
}

func durationMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (a *Auditor) emit(l *line) {
	if a.obs != nil {
		a.observe(l) // observe.go
	}
	if a.lines == nil {
		return // observing only: no audit log
	}
	// A copy goes to Marshal, so that l itself does not escape: without
	// an audit log the caller's line stays on its stack.
	c := *l
	b, err := json.Marshal(&c)
	if err != nil {
		// Arguments that are not valid JSON cannot come (the message was
		// parsed), but a line must never be lost to them.
		c.Arguments = nil
		b, _ = json.Marshal(&c)
	}
	a.log(append(b, '\n'))
}

// principal names r's principal: "KIND:NAME", or "" for none.
func principal(r *http.Request) string {
	p := conn.Principal(r.Context())
	if p == nil {
		return ""
	}
	return p.Kind + ":" + p.Name
}

// AuthRefused logs a request to target refused by authentication with
// status, asked at start (Now). Its body was not read (nobody's request is
// not worth reading), so the line has no JSON-RPC method or id: it names
// the HTTP method and path instead, and the refused principal when the
// Authenticator knows it (an API key without the rights to the target).
// A nil Auditor logs nothing.
func (a *Auditor) AuthRefused(r *http.Request, target Target, start time.Time, status int, who *auth.Principal) {
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
	l.Outcome = OutcomeUnauthenticated
	if status == http.StatusForbidden {
		l.Outcome = OutcomeForbidden
	}
	l.Code = protocol.CodeInvalidRequest
	a.emit(&l)
}
