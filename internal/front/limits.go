package front

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file holds the per-principal limits (Config.Limits): a request
// rate, requests in flight, sessions, and a rate per principal and tool;
// and, in overload.go, the gateway-wide cap on requests in flight. They
// are checked once a POST's messages are read (post, for either era and
// the stateless revision; legacyPost) and when a session is opened (open),
// before anything reaches a server. A refusal is 429 (503 for the global
// cap) with Retry-After and a JSON-RPC error carrying the request's id; a
// legacy POST's refusal travels on the session's SSE stream instead
// (legacy.go). Requests without a principal (authentication off, or an
// open target asked without credentials) share one anonymous principal.

// Limits are the per-principal limits, and one for the whole gateway
// (MaxInFlightTotal); a zero field is no limit.
type Limits struct {
	// RequestsPerSecond and Burst bound the POSTs (a batch is one) of
	// each principal: a token bucket of Burst tokens refilled at
	// RequestsPerSecond. Burst 0: max(1, ceil(RequestsPerSecond)).
	RequestsPerSecond float64
	Burst             int
	// MaxInFlight bounds the POSTs of each principal being answered at
	// once.
	MaxInFlight int
	// MaxSessions bounds the live sessions (initialized, or legacy SSE)
	// of each principal.
	MaxSessions int
	// ToolsPerSecond and ToolBurst bound the tools/call requests of each
	// principal to each tool (by name). ToolBurst 0: as Burst is.
	ToolsPerSecond float64
	ToolBurst      int
	// MaxInFlightTotal bounds the POSTs of all principals being answered
	// at once (overload.go); past it, 503.
	MaxInFlightTotal int
	// MaxPrincipals bounds the principals whose state is kept; idle ones
	// (nothing in flight, no session, buckets full) are evicted to make
	// room. Default 10,000.
	MaxPrincipals int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// maxToolsPerPrincipal bounds the tool buckets of one principal: tool
// names come from clients.
const maxToolsPerPrincipal = 256

// limiter keeps the limits' state per principal.
type limiter struct {
	cfg Limits
	// perPrincipal: a limit of POSTs per principal is set, so admitRequest
	// takes mu; without one only the global cap's atomic counter is used.
	perPrincipal bool
	global       *overload // nil: no global cap

	mu         sync.Mutex
	principals map[string]*principalState // guarded by mu
}

type principalState struct {
	rate     *rate.Limiter
	tools    map[string]*rate.Limiter
	inFlight int
	pending  int // sessions being opened
	sessions map[*session.Session]struct{}
}

func burstFor(rps float64, burst int) int {
	if burst > 0 {
		return burst
	}
	return max(1, int(math.Ceil(rps)))
}

func newLimiter(cfg *Limits) *limiter {
	if cfg == nil {
		return nil
	}
	l := &limiter{cfg: *cfg, principals: map[string]*principalState{}}
	if l.cfg.MaxPrincipals <= 0 {
		l.cfg.MaxPrincipals = 10000
	}
	if l.cfg.Now == nil {
		l.cfg.Now = time.Now
	}
	l.perPrincipal = l.cfg.RequestsPerSecond > 0 || l.cfg.MaxInFlight > 0 || l.cfg.ToolsPerSecond > 0
	if l.cfg.MaxInFlightTotal > 0 {
		l.global = &overload{max: int64(l.cfg.MaxInFlightTotal)}
	}
	return l
}

// state returns principal key's state, making room for it if needed;
// nil when the map is full of busy principals. mu is held.
func (l *limiter) state(key string, now time.Time, store *session.Store) *principalState {
	if ps := l.principals[key]; ps != nil {
		return ps
	}
	if len(l.principals) >= l.cfg.MaxPrincipals {
		for k, ps := range l.principals {
			if l.idle(ps, now, store) {
				delete(l.principals, k)
			}
		}
		if len(l.principals) >= l.cfg.MaxPrincipals {
			return nil
		}
	}
	ps := &principalState{}
	if l.cfg.RequestsPerSecond > 0 {
		ps.rate = rate.NewLimiter(rate.Limit(l.cfg.RequestsPerSecond), burstFor(l.cfg.RequestsPerSecond, l.cfg.Burst))
	}
	l.principals[key] = ps
	return ps
}

// idle reports whether forgetting ps changes nothing a client could see.
func (l *limiter) idle(ps *principalState, now time.Time, store *session.Store) bool {
	if ps.inFlight > 0 || ps.pending > 0 || liveSessions(ps, store) > 0 {
		return false
	}
	if ps.rate != nil && ps.rate.TokensAt(now) < float64(ps.rate.Burst()) {
		return false
	}
	for _, t := range ps.tools {
		if t.TokensAt(now) < float64(t.Burst()) {
			return false
		}
	}
	return true
}

// liveSessions counts ps's sessions still in the store, forgetting the
// others. mu is held.
func liveSessions(ps *principalState, store *session.Store) int {
	for s := range ps.sessions {
		if store.Get(s.ID) != s {
			delete(ps.sessions, s)
		}
	}
	return len(ps.sessions)
}

// limitKey is the limiter's key of r's principal: anonymous is "".
func limitKey(r *http.Request) string { return ownerKey(Principal(r.Context())) }

// Outcomes of refused requests in the audit log.
const (
	outcomeRateLimited = "rate_limited" // a per-principal limit: 429
	outcomeOverloaded  = "overloaded"   // the global cap: 503
)

// refusal is why a request is refused: its message and Retry-After, the
// HTTP status (0: 429) and the audit log's outcome ("": rate_limited).
type refusal struct {
	msg     string
	retry   time.Duration
	status  int
	outcome string
}

func (ref *refusal) httpStatus() int {
	if ref.status == 0 {
		return http.StatusTooManyRequests
	}
	return ref.status
}

func (ref *refusal) auditOutcome() string {
	if ref.outcome == "" {
		return outcomeRateLimited
	}
	return ref.outcome
}

// reserve takes one token of lim at now, or returns how long until it
// could (the token is then given back).
func reserve(lim *rate.Limiter, now time.Time) (*rate.Reservation, time.Duration) {
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return nil, time.Duration(math.MaxInt64)
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return nil, d
	}
	return res, 0
}

// noRelease is the release of a POST no limit counts.
func noRelease() {}

// admitRequest checks the limits of a POST of msgs: the global cap first
// (one atomic add; a refusal there costs no lock), then the principal's.
// When it may go on, the caller calls release once it is answered.
//
// A POST of no request (notifications, and responses to the servers'
// requests) is answered at once and holds nothing: the in-flight caps do
// not count it. Refusing it could wedge the requests in flight: a tool
// call waiting on a sampling response, or a cancellation that would free
// a slot.
func (l *limiter) admitRequest(key string, msgs []jsonrpc.Message, store *session.Store) (release func(), ref *refusal) {
	requests := countRequests(msgs) > 0
	releaseGlobal := noRelease
	if l.global != nil && requests {
		if releaseGlobal, ref = l.global.admit(l.cfg.Now); ref != nil {
			return nil, ref
		}
	}
	if !l.perPrincipal {
		return releaseGlobal, nil
	}
	releaseOwn, ref := l.admitPrincipal(key, msgs, requests, store)
	if ref != nil {
		releaseGlobal()
		return nil, ref
	}
	return func() {
		releaseOwn()
		releaseGlobal()
	}, nil
}

// admitPrincipal checks the limits of principal key.
func (l *limiter) admitPrincipal(key string, msgs []jsonrpc.Message, requests bool, store *session.Store) (release func(), ref *refusal) {
	now := l.cfg.Now()
	var tools []string
	if l.cfg.ToolsPerSecond > 0 {
		for i := range msgs {
			if msgs[i].Kind == jsonrpc.KindRequest && msgs[i].MethodIs(protocol.MethodToolsCall) {
				tools = append(tools, paramsOf(&msgs[i]).Name)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.state(key, now, store)
	if ps == nil {
		return nil, &refusal{msg: "too many principals are active", retry: time.Second}
	}
	if requests && l.cfg.MaxInFlight > 0 && ps.inFlight >= l.cfg.MaxInFlight {
		return nil, &refusal{msg: "too many requests in flight (limit " + strconv.Itoa(l.cfg.MaxInFlight) + ")", retry: time.Second}
	}
	var taken []*rate.Reservation
	if ps.rate != nil {
		res, d := reserve(ps.rate, now)
		if d > 0 {
			return nil, &refusal{msg: "request rate limit exceeded", retry: d}
		}
		taken = append(taken, res)
	}
	for _, name := range tools {
		res, d := reserve(ps.tool(name, l.cfg, now), now)
		if d > 0 {
			// Give back what this request took: it does not go on.
			for _, t := range taken {
				t.CancelAt(now)
			}
			return nil, &refusal{msg: "rate limit exceeded for tool " + strconv.Quote(name), retry: d}
		}
		taken = append(taken, res)
	}
	ps.inFlight++
	return func() {
		l.mu.Lock()
		ps.inFlight--
		l.mu.Unlock()
	}, nil
}

// tool returns the bucket of tool name, making room for it if needed (a
// principal calling more tools than maxToolsPerPrincipal shares one
// bucket among the newest).
func (ps *principalState) tool(name string, cfg Limits, now time.Time) *rate.Limiter {
	if t := ps.tools[name]; t != nil {
		return t
	}
	if ps.tools == nil {
		ps.tools = map[string]*rate.Limiter{}
	}
	if len(ps.tools) >= maxToolsPerPrincipal {
		for k, t := range ps.tools {
			if t.TokensAt(now) >= float64(t.Burst()) {
				delete(ps.tools, k)
			}
		}
		if len(ps.tools) >= maxToolsPerPrincipal {
			name = "\x00overflow"
			if t := ps.tools[name]; t != nil {
				return t
			}
		}
	}
	burst := cfg.ToolBurst
	if burst <= 0 {
		burst = burstFor(cfg.ToolsPerSecond, 0)
	}
	t := rate.NewLimiter(rate.Limit(cfg.ToolsPerSecond), burst)
	ps.tools[name] = t
	return t
}

// admitSession reserves one of the principal's sessions; the caller
// calls commit with the session opened, or nil when it was not.
func (l *limiter) admitSession(key string, store *session.Store) (commit func(*session.Session), ref *refusal) {
	if l.cfg.MaxSessions <= 0 {
		return func(*session.Session) {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.state(key, l.cfg.Now(), store)
	if ps == nil {
		return nil, &refusal{msg: "too many principals are active", retry: time.Second}
	}
	if liveSessions(ps, store)+ps.pending >= l.cfg.MaxSessions {
		return nil, &refusal{msg: "too many sessions (limit " + strconv.Itoa(l.cfg.MaxSessions) + "); delete one (DELETE with its Mcp-Session-Id) or let one expire", retry: 5 * time.Second}
	}
	ps.pending++
	return func(s *session.Session) {
		l.mu.Lock()
		defer l.mu.Unlock()
		ps.pending--
		if s != nil {
			if ps.sessions == nil {
				ps.sessions = map[*session.Session]struct{}{}
			}
			ps.sessions[s] = struct{}{}
			if l.principals[key] != ps {
				// Evicted meanwhile (it was not idle, so this cannot
				// happen; kept safe anyway).
				l.principals[key] = ps
			}
		}
	}, nil
}

// refuse answers a request refused by a limit: 429 (503 for the global
// cap), Retry-After, and a JSON-RPC error with the request's id (null for
// a batch). It is only for a response not started: a refusal once a
// stream is open goes on the stream (legacy.go).
func refuse(w http.ResponseWriter, ref *refusal, id []byte) {
	if aw, ok := w.(*auditWriter); ok {
		aw.refused = ref.auditOutcome()
	}
	w.Header().Set("Retry-After", retryAfter(ref.retry))
	writeErrorID(w, ref.httpStatus(), id, protocol.CodeServerError, "mcpgate: "+ref.msg, nil)
}

// check checks the limits of a POST of msgs: it returns the release to
// call once the POST is answered, or why it is refused.
func (h *Handler) check(r *http.Request, msgs []jsonrpc.Message) (release func(), ref *refusal) {
	if h.limits == nil {
		return h.track(noRelease, msgs), nil // observe.go
	}
	release, ref = h.limits.admitRequest(limitKey(r), msgs, h.store)
	return h.track(release, msgs), ref
}

// admit checks the limits of a POST of msgs (post: either era, and the
// stateless revision): it returns the release to call once the POST is
// answered, or answers the refusal itself and returns false.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, msgs []jsonrpc.Message, batch bool) (func(), bool) {
	release, ref := h.check(r, msgs)
	if ref != nil {
		var id []byte
		if !batch && len(msgs) == 1 {
			id = msgs[0].Bytes(msgs[0].ID)
		}
		refuse(w, ref, id)
		return nil, false
	}
	return release, true
}

// callParams are the parts of a request's params the limits and the
// audit log look at.
type callParams struct {
	Name      string          `json:"name"`
	URI       string          `json:"uri"`
	Arguments json.RawMessage `json:"arguments"`
}

// paramsOf reads msg's params (params.go; zero when it has none, or when
// they are ambiguous: such requests share the tool bucket "", and the
// policy refuses them).
func paramsOf(msg *jsonrpc.Message) callParams {
	cp, err := ReadParams(msg)
	if err != nil {
		return callParams{}
	}
	return callParams{Name: cp.Name, URI: cp.URI, Arguments: json.RawMessage(cp.Arguments)}
}
