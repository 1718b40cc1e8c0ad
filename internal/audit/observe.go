package audit

import (
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/limits"
)

// This file lets a caller watch the requests the front answers, for
// metrics. An Observer gets one Record per client request exactly where
// the audit log gets its line: the same requests, the same outcomes, so
// the two never disagree. Without an audit log the front uses an Auditor
// that writes nothing and only observes (Observe): the audit code path is
// the one place requests are followed to their end, and it is taken only
// when one of the two is set.

// Observer watches the client requests the front answers.
//
// Request is called once per client request, when its answer is known
// (the Record by value: a pointer through the interface would put each
// on the heap):
// on the goroutine of the request's POST, or, for a legacy /messages
// request, on the goroutine that puts its reply on the session's stream
// (a server's reader). It must be safe for concurrent use and must not
// block: it is on the path of replies.
type Observer interface {
	Request(r Record)
}

// Record is one client request, as the audit log tells it.
type Record struct {
	Target    string // the server's or the endpoint's name
	Kind      string // "server" or "endpoint"
	Method    string // the JSON-RPC method; "" for a request refused before its body was read
	Name      string // with an audit log: what it uses (a tool's or a prompt's name, a resource's URI)
	Principal string // "KIND:NAME", or "" for none
	Duration  time.Duration
	Status    int    // the HTTP status of its POST (202 for a legacy POST)
	Outcome   string // one of the Outcome* constants
	Code      int    // the JSON-RPC error code of its reply; 0 for none
	BytesIn   int    // the request's bytes (its POST's, refused before the body was read)
	BytesOut  int64  // the reply's bytes (its POST's response, for a /mcp POST)
}

// Outcomes of a Record (the audit log's, and OutcomeDenied, which the
// audit log tells as "error").
const (
	OutcomeOK              = "ok"
	OutcomeError           = "error"                   // an error reply (a server's, or the gateway's)
	OutcomeCancelled       = "cancelled"               // a legacy request the client cancelled: no reply
	OutcomeRateLimited     = limits.OutcomeRateLimited // a per-principal limit: 429
	OutcomeOverloaded      = limits.OutcomeOverloaded  // the global cap: 503
	OutcomeUnauthenticated = "unauthenticated"         // 401 (or another refusal of the Authenticator)
	OutcomeForbidden       = "forbidden"               // 403: credentials without the rights to the target
	OutcomeDenied          = "denied"                  // refused by the target's policy
)

// observer is an Auditor's Observer and the count of POSTs in flight.
type observer struct {
	o        Observer
	denied   func(code int, msg string) bool // nil: no error is a denial
	inFlight atomic.Int64
}

// Observe returns the Auditor the front uses for a, the configured audit
// log (nil: none), and o: a itself, or one that only observes. denied
// tells which JSON-RPC errors are a policy's refusals (OutcomeDenied):
// the policy's code alone is also that of a server's invalid params.
// With both a and o, o is attached to a: an Auditor serves one front.
func Observe(a *Auditor, o Observer, denied func(code int, msg string) bool) *Auditor {
	if o == nil {
		return a
	}
	if a == nil {
		a = &Auditor{now: time.Now} // no lines: emit only observes
	}
	a.obs = &observer{o: o, denied: denied}
	return a
}

// observe hands the request of line l to the Observer.
func (a *Auditor) observe(l *line) {
	outcome := l.Outcome
	if l.denied {
		outcome = OutcomeDenied
	}
	a.obs.o.Request(Record{
		Target: l.Target, Kind: l.Kind, Method: l.Method, Name: l.Name, Principal: l.Principal,
		Duration: time.Duration(l.DurationMs * float64(time.Millisecond)),
		Status:   l.Status, Outcome: outcome, Code: l.Code, BytesIn: l.BytesIn, BytesOut: l.BytesOut,
	})
}

// Track counts a POST carrying a request as in flight until release
// (InFlight); release as it is without an Observer.
func (a *Auditor) Track(release func()) func() {
	if a == nil || a.obs == nil {
		return release
	}
	n := &a.obs.inFlight
	n.Add(1)
	return func() {
		n.Add(-1)
		release()
	}
}

// Enter counts a POST carrying a request as in flight until Leave, and
// reports whether it did (only with an Observer): Track without a closure
// to allocate, for a caller that can defer Leave itself.
func (a *Auditor) Enter() bool {
	if a == nil || a.obs == nil {
		return false
	}
	a.obs.inFlight.Add(1)
	return true
}

// Leave ends the count of a POST Enter counted.
func (a *Auditor) Leave() { a.obs.inFlight.Add(-1) }

// InFlight returns the POSTs being tracked (Track); 0 without an
// Observer.
func (a *Auditor) InFlight() int64 {
	if a == nil || a.obs == nil {
		return 0
	}
	return a.obs.inFlight.Load()
}
