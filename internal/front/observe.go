package front

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file lets a caller watch the requests the Handler answers
// (Config.Observer), for metrics. An Observer gets one RequestRecord per
// client request exactly where the audit log gets its line (audit.go,
// legacy_replies.go, auth.go): the same requests, the same outcomes, so
// the two never disagree. Without an audit log New gives the Handler an
// Auditor that writes nothing and only observes: the audit code path is
// the one place requests are followed to their end, and it is taken only
// when one of the two is set.

// Observer watches the client requests a Handler answers.
//
// Request is called once per client request, when its answer is known:
// on the goroutine of the request's POST, or, for a legacy /messages
// request, on the goroutine that puts its reply on the session's stream
// (a server's reader). It must be safe for concurrent use and must not
// block: it is on the path of replies.
type Observer interface {
	Request(r *RequestRecord)
}

// RequestRecord is one client request, as the audit log tells it. The
// Observer must not keep it past Request.
type RequestRecord struct {
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

// Outcomes of a RequestRecord (the audit log's, and OutcomeDenied, which
// the audit log tells as "error").
const (
	OutcomeOK              = "ok"
	OutcomeError           = "error"            // an error reply (a server's, or the gateway's)
	OutcomeCancelled       = "cancelled"        // a legacy request the client cancelled: no reply
	OutcomeRateLimited     = outcomeRateLimited // a per-principal limit: 429
	OutcomeOverloaded      = outcomeOverloaded  // the global cap: 503
	OutcomeUnauthenticated = "unauthenticated"  // 401 (or another refusal of the Authenticator)
	OutcomeForbidden       = "forbidden"        // 403: credentials without the rights to the target
	OutcomeDenied          = "denied"           // refused by the target's policy (policy.go)
)

// observer is an Auditor's Observer and the count of POSTs in flight.
type observer struct {
	o        Observer
	inFlight atomic.Int64
}

// observed returns the Auditor the Handler uses for a, the configured
// audit log (nil: none), and o: a itself, or one that only observes.
// With both, o is attached to a: an Auditor serves one Handler.
func observed(a *Auditor, o Observer) *Auditor {
	if o == nil {
		return a
	}
	if a == nil {
		a = &Auditor{now: time.Now} // no lines: emit only observes
	}
	a.obs = &observer{o: o}
	return a
}

// observe hands the request of line l to the Observer.
func (a *Auditor) observe(l *auditLine) {
	outcome := l.Outcome
	if l.denied {
		outcome = OutcomeDenied
	}
	a.obs.o.Request(&RequestRecord{
		Target: l.Target, Kind: l.Kind, Method: l.Method, Name: l.Name, Principal: l.Principal,
		Duration: time.Duration(l.DurationMs * float64(time.Millisecond)),
		Status:   l.Status, Outcome: outcome, Code: l.Code, BytesIn: l.BytesIn, BytesOut: l.BytesOut,
	})
}

// isDenial reports whether a JSON-RPC error is a policy's refusal (see
// guardedConn.denial): the code alone is also that of a server's invalid
// params.
func isDenial(code int, msg string) bool {
	return code == CodePolicyDenied && strings.HasPrefix(msg, "mcpgate: ") && strings.Contains(msg, " is not allowed") &&
		strings.Contains(msg, " by the policy of ")
}

// track counts a POST of msgs the limits admitted as in flight until
// release (InFlight), when it carries a request; release as it is without
// an Observer.
func (h *Handler) track(release func(), msgs []jsonrpc.Message) func() {
	a := h.cfg.Audit
	if release == nil || a == nil || a.obs == nil || countRequests(msgs) == 0 {
		return release
	}
	n := &a.obs.inFlight
	n.Add(1)
	return func() {
		n.Add(-1)
		release()
	}
}

// InFlight returns the POSTs being answered that carry requests, of
// either era (a legacy POST until its replies are on its session's
// stream) and of the stateless revision. It is 0 without
// Config.Observer.
func (h *Handler) InFlight() int64 {
	if a := h.cfg.Audit; a != nil && a.obs != nil {
		return a.obs.inFlight.Load()
	}
	return 0
}

// SessionCount is how many sessions one target has of one era.
type SessionCount struct {
	Target string // the server's or the endpoint's name
	Kind   string // "server" or "endpoint"
	Era    string // the negotiated protocol version, or "legacy-sse"
	N      int
}

// EraLegacySSE is the SessionCount.Era of a 2024-11-05 HTTP+SSE session.
const EraLegacySSE = "legacy-sse"

// SessionCounts counts the established sessions (initialized, or a legacy
// session's stream opened) by target and era; a stateless request, which
// the Handler records as a session while it runs, is not one.
func (h *Handler) SessionCounts() []SessionCount {
	type key struct{ target, era string }
	counts := map[key]int{}
	for _, s := range h.store.Snapshot() {
		if _, ok := s.Established(); !ok {
			continue
		}
		era := EraLegacySSE
		if !s.Legacy() {
			era = s.Version()
		}
		counts[key{s.Server, era}]++
	}
	out := make([]SessionCount, 0, len(counts))
	for k, n := range counts {
		c := SessionCount{Target: k.target, Kind: "server", Era: k.era, N: n}
		if name, ok := strings.CutPrefix(k.target, endpointKeyPrefix); ok {
			c.Kind, c.Target = "endpoint", name
		}
		out = append(out, c)
	}
	return out
}
