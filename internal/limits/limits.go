package limits

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file holds the per-principal limits: a request rate, requests in
// flight, sessions, and a rate per principal and tool; and, in
// overload.go, the gateway-wide cap on requests in flight. The front
// checks them once a POST's messages are read (for either era and the
// stateless revision, and a legacy /messages POST) and when a session is
// opened, before anything reaches a server. A refusal is 429 (503 for the
// global cap) with Retry-After and a JSON-RPC error carrying the request's
// id; a legacy POST's refusal travels on the session's SSE stream instead.
// Requests without a principal (authentication off, or an open target
// asked without credentials) share one anonymous principal (key "").

// Config is the per-principal limits, and one for the whole gateway
// (MaxInFlightTotal); a zero field is no limit.
type Config struct {
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
	// Shared, if set, is where the limits of all replicas are counted
	// together (shared.go); nil: this replica's limits are its own.
	Shared Shared
}

// maxToolsPerPrincipal bounds the tool buckets of one principal: tool
// names come from clients.
const maxToolsPerPrincipal = 256

// Limiter keeps the limits' state per principal. A nil *Limiter limits
// nothing.
type Limiter struct {
	cfg Config
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
	// live counts the sessions committed and not yet out of their
	// store: each one's Session.OnRemoved takes it back, so that no
	// admission walks a principal's sessions.
	live int
	// ended counts sessions the Shared store counts that were seen gone
	// and not yet given back to it.
	ended int
}

func burstFor(rps float64, burst int) int {
	if burst > 0 {
		return burst
	}
	return max(1, int(math.Ceil(rps)))
}

// New returns the Limiter of cfg; nil for a nil cfg (no limits).
func New(cfg *Config) *Limiter {
	if cfg == nil {
		return nil
	}
	l := &Limiter{cfg: *cfg, principals: map[string]*principalState{}}
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
func (l *Limiter) state(key string, now time.Time) *principalState {
	if ps := l.principals[key]; ps != nil {
		return ps
	}
	if len(l.principals) >= l.cfg.MaxPrincipals {
		for k, ps := range l.principals {
			if l.idle(ps, now) {
				l.giveBackEnded(k, ps)
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
func (l *Limiter) idle(ps *principalState, now time.Time) bool {
	if ps.inFlight > 0 || ps.pending > 0 || ps.live > 0 {
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

// NoRelease is the release of a POST no limit counts.
func NoRelease() {}

// AdmitRequest checks the limits of a POST of msgs: the global cap first
// (one atomic add; a refusal there costs no lock), then the principal's.
// When it may go on, the caller calls release once it is answered.
//
// A POST of no request (notifications, and responses to the servers'
// requests) is answered at once and holds nothing: the in-flight caps do
// not count it. Refusing it could wedge the requests in flight: a tool
// call waiting on a sampling response, or a cancellation that would free
// a slot.
func (l *Limiter) AdmitRequest(key string, msgs []jsonrpc.Message) (release func(), ref *Refusal) {
	requests := hasRequest(msgs)
	releaseGlobal := NoRelease
	if l.global != nil && requests {
		if releaseGlobal, ref = l.global.admit(l.cfg.Now); ref != nil {
			return nil, ref
		}
	}
	if !l.perPrincipal {
		return releaseGlobal, nil
	}
	releaseOwn, ref := l.admitPrincipal(key, msgs, requests)
	if ref != nil {
		releaseGlobal()
		return nil, ref
	}
	return func() {
		releaseOwn()
		releaseGlobal()
	}, nil
}

// admitPrincipal checks the limits of principal key: in the Shared
// store when there is one and it answers, else in this replica's buckets,
// with each limit divided by the live replicas when the store failed.
func (l *Limiter) admitPrincipal(key string, msgs []jsonrpc.Message, requests bool) (release func(), ref *Refusal) {
	now := l.cfg.Now()
	var tools []string
	if l.cfg.ToolsPerSecond > 0 {
		for i := range msgs {
			if msgs[i].Kind == jsonrpc.KindRequest && msgs[i].MethodIs(protocol.MethodToolsCall) {
				tools = append(tools, toolName(&msgs[i]))
			}
		}
	}
	share := 1
	if l.cfg.Shared != nil {
		release, ref, err := l.admitShared(key, tools, requests, now)
		if err == nil {
			return release, ref
		}
		share = max(1, l.cfg.Shared.Live())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.state(key, now)
	if ps == nil {
		return nil, &Refusal{Msg: "too many principals are active", Retry: time.Second}
	}
	if requests && l.cfg.MaxInFlight > 0 && ps.inFlight >= shareOf(l.cfg.MaxInFlight, share) {
		return nil, inFlightRefusal(l.cfg.MaxInFlight)
	}
	var taken []*rate.Reservation
	if ps.rate != nil {
		fit(ps.rate, l.cfg.RequestsPerSecond, burstFor(l.cfg.RequestsPerSecond, l.cfg.Burst), share, now)
		res, d := reserve(ps.rate, now)
		if d > 0 {
			return nil, rateRefusal(d)
		}
		taken = append(taken, res)
	}
	for _, name := range tools {
		lim := ps.tool(name, l.cfg, now)
		fit(lim, l.cfg.ToolsPerSecond, toolBurst(l.cfg), share, now)
		res, d := reserve(lim, now)
		if d > 0 {
			// Give back what this request took: it does not go on.
			for _, t := range taken {
				t.CancelAt(now)
			}
			return nil, toolRefusal(name, d)
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
func (ps *principalState) tool(name string, cfg Config, now time.Time) *rate.Limiter {
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
	t := rate.NewLimiter(rate.Limit(cfg.ToolsPerSecond), toolBurst(cfg))
	ps.tools[name] = t
	return t
}

// AdmitSession reserves one of the principal's sessions; the caller
// calls commit with the session opened, or nil when it was not. With a
// Shared store the sessions are counted there (this replica's ended ones
// given back in the same round trip); when it fails, against this
// replica's share of the limit.
func (l *Limiter) AdmitSession(key string) (commit func(*session.Session), ref *Refusal) {
	if l.cfg.MaxSessions <= 0 {
		return func(*session.Session) {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.state(key, l.cfg.Now())
	if ps == nil {
		return nil, &Refusal{Msg: "too many principals are active", Retry: time.Second}
	}
	live := ps.live
	share := 1
	if l.cfg.Shared != nil {
		ended := ps.ended
		ps.ended = 0
		ps.pending++ // held across the unlocked round trip
		l.mu.Unlock()
		ok, err := l.cfg.Shared.AdmitSession(context.Background(), key, l.cfg.MaxSessions, ended)
		l.mu.Lock()
		ps.pending--
		if err == nil {
			if !ok {
				return nil, sessionsRefusal(l.cfg.MaxSessions)
			}
			ps.pending++
			return l.commitSession(key, ps, true), nil
		}
		ps.ended += ended // not given back: try again next time
		share = max(1, l.cfg.Shared.Live())
		live = ps.live
	}
	if live+ps.pending >= shareOf(l.cfg.MaxSessions, share) {
		return nil, sessionsRefusal(l.cfg.MaxSessions)
	}
	ps.pending++
	return l.commitSession(key, ps, false), nil
}

// commitSession is AdmitSession's commit; shared: the Shared store counted
// the session.
func (l *Limiter) commitSession(key string, ps *principalState, shared bool) func(*session.Session) {
	return func(s *session.Session) {
		l.mu.Lock()
		ps.pending--
		if s == nil {
			if shared {
				l.cfg.Shared.Release(key, Session, 1)
			}
			l.mu.Unlock()
			return
		}
		ps.live++
		if l.principals[key] != ps {
			// Evicted meanwhile (it was not idle, so this cannot
			// happen; kept safe anyway).
			l.principals[key] = ps
		}
		l.mu.Unlock()
		// Outside mu: it runs at once if s is already out of its store.
		s.OnRemoved(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			ps.live--
			if shared {
				ps.ended++
			}
		})
	}
}

// hasRequest reports whether msgs hold a request (one that gets a reply).
func hasRequest(msgs []jsonrpc.Message) bool {
	for i := range msgs {
		if msgs[i].Kind == jsonrpc.KindRequest {
			return true
		}
	}
	return false
}

// toolName is the name a tools/call request calls (conn.ReadParams): ""
// when its params are missing or ambiguous. Such requests share the tool
// bucket "", and the policy refuses them.
func toolName(msg *jsonrpc.Message) string {
	cp, err := conn.ReadParams(msg)
	if err != nil {
		return ""
	}
	return cp.Name
}
