package aggregate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// clientSession is one client session of an endpoint (the session eras): one
// session of each member, opened with the client's session and ended with
// it.
//
// The client's requests are answered exactly once: each is registered in
// the session's call table (conn.Calls) as a pending entry, which is also
// the Stream a member answers on, so that the first answer (the member's,
// a timeout, a cancellation, the session's end) wins and every later one
// is dropped. The endpoint's own work for a
// session (merging lists, routing a call before the names are known,
// initializing members) runs on goroutines bounded by the members'
// timeouts and ended by Close; none of them is waited for by anything on
// the client's path.
type clientSession struct {
	e         *Endpoint
	general   conn.Stream
	principal atomic.Pointer[auth.Principal] // member policies apply to it (principal.go)
	ctx       context.Context                // ended by Close
	stop      context.CancelFunc
	// stateless: a stateless request's session, its members' sessions
	// opened with OpenStateless and caps (static after open).
	stateless bool
	caps      []byte
	// calls are the client's requests in flight, by id (a second request
	// of an id in flight is refused); it has its own lock, taken under mu
	// (never the other way round).
	calls conn.Calls[*pending]

	mu sync.Mutex
	// guarded by mu:
	// members is the session's table of members, by index (the
	// endpoint's slots, members.go): replaced, never modified in place,
	// when the endpoint's members change, so a *member taken under mu
	// may be used after.
	members     []*member
	tableVer    uint64 // the endpoint's table members was made from
	closed      bool
	closeText   string           // what requests are told once closed
	version     string           // negotiated by initialize; "" before
	initParams  []byte           // the client's initialize params, for members that come up later
	initialized bool             // the client sent notifications/initialized
	level       []byte           // the client's last logging/setLevel params, likewise
	subs        map[string]int   // the client's resources/subscribe URIs, to the member index each went to (subscriptions.go)
	changed     kindSet          // list_changed notifications due
	flush       *time.Timer      // sends them; nil when none is due
	epoch       uint64           // bumped whenever a member's list or visibility changes
	viewKeys    [numKinds]string // the key of each kind's view, as of keyEpoch
	keyEpoch    [numKinds]uint64
}

// member is a session's connection to one member.
type member struct {
	i   int
	m   *Member // the member as the session opened it
	gen uint64  // the endpoint's generation of slot i it belongs to
	// apart: its session is on the member's processes for stateless
	// requests (OpenStateless), whose state Member.State (the state of
	// the process of its sessions) does not tell.
	apart bool
	// removed: a tombstone of a member removed by SetMembers, with
	// what it listed; never visible.
	removed bool
	// joinCtx bounds the Open of a member that joined after the session
	// opened (join); stopJoin ends it, also when reconcile replaces the
	// entry. Set before join starts, nil for the others.
	joinCtx  context.Context
	stopJoin context.CancelFunc
	// guarded by conn.mu:
	conn    conn.Conn // nil while Open failed or is under way, and in a tombstone
	seen    *Member   // the endpoint's member its lists were loaded for (a policy change reloads them)
	ready   bool      // the member's state as the endpoint last saw it
	seq     uint64    // the endpoint's count of its state changes, at ready
	up      bool      // initialized in this session
	initing bool      // an initialize of it is under way
	failed  string    // why its Open or initialize failed, "" if it did not
	caps    caps
	level   []byte // the logging/setLevel params last sent to it
	lists   [numKinds]listState
	policy  [numKinds]policyKey // its policy's say on each list
}

// pending is a client request in flight. It is the Stream its member
// answers on.
type pending struct {
	c *clientSession
	// call is its entry in c.calls: the client's id and stream (ID, Out),
	// ended once; its Cancel is release.
	call   conn.Call[*pending]
	member int     // the member it was forwarded to; -1 before. Written once, before forwarding.
	mc     *member // that member (the session's entry may be replaced since)
	// guarded by c.mu (set only while the call has not ended):
	timer  *time.Timer        // the member's Timeout
	cancel context.CancelFunc // ends the endpoint's work for it
}

// Send relays what the member sends about the request (progress, log
// messages, its server requests) to the client's stream for it.
func (p *pending) Send(msg []byte) { p.c.relay(p.mc, msg, p.call.Out) }

// Reply is the member's answer (or nil: cancelled by the client).
func (p *pending) Reply(msg []byte) { p.c.finish(p, msg, true) }

// open opens a session of each member: in parallel (a session-isolated
// member starts a process), each with a general stream of its own that
// relays to the client's. A critical member that cannot be opened fails
// the session; another is down for this session until it comes up.
//
// stateless opens the sessions of a stateless request: through a member's
// OpenStateless when it has one (caps are the request's), so that the
// member's processes for stateless requests serve it.
func (e *Endpoint) open(ctx context.Context, general conn.Stream, stateless bool, caps []byte) (*clientSession, error) {
	// The members' sessions are parts of this one, which is owner-bound:
	// none of them is handed off to the front's sink on its own.
	ctx = conn.WithHandoff(ctx, nil)
	c := &clientSession{e: e, general: general, subs: map[string]int{}, stateless: stateless, caps: caps}
	c.principal.Store(conn.Principal(ctx))
	c.ctx, c.stop = context.WithCancel(context.Background())
	tab, ver := e.table()
	members := make([]*member, len(tab))
	conns := make([]conn.Conn, len(tab))
	errs := make([]error, len(tab))
	var wg sync.WaitGroup
	for i, s := range tab {
		mc := &member{i: i, m: s.m, gen: s.gen, seen: s.m, removed: s.removed, apart: stateless && s.m.OpenStateless != nil}
		mc.ready, mc.seq = s.st.ready, s.st.seq
		members[i] = mc
		if s.removed {
			mc.failed = removedReason(s.m.Name, e.opts.Name)
			continue
		}
		wg.Go(func() {
			if m := s.m; mc.apart {
				conns[i], errs[i] = m.OpenStateless(ctx, memberGeneral{c, mc}, caps)
			} else {
				conns[i], errs[i] = m.Backend.Open(ctx, memberGeneral{c, mc})
			}
		})
	}
	c.mu.Lock()
	c.members, c.tableVer = members, ver
	c.mu.Unlock()
	wg.Wait()
	// Under mu: the members opened first may already be sending.
	c.mu.Lock()
	var critical error
	for i, mc := range c.members {
		mc.conn = conns[i]
		if err := errs[i]; err != nil {
			mc.failed = "opening its session failed: " + err.Error()
			if mc.m.Critical && critical == nil {
				critical = fmt.Errorf("server %q (critical in endpoint %q): %w", mc.m.Name, e.opts.Name, err)
			}
		}
	}
	c.mu.Unlock()
	if critical != nil {
		c.closeMembers("")
		c.stop()
		return nil, critical
	}
	for i, err := range errs {
		if err != nil {
			e.log.Info("member not available to a session", "server", tab[i].m.Name, "err", err)
		}
	}
	return c, nil
}

// Version returns the protocol version the session's initialize
// negotiated.
func (c *clientSession) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Handle routes one message of the client.
func (c *clientSession) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch msg.Kind {
	case jsonrpc.KindRequest:
		c.request(ctx, msg, out)
	case jsonrpc.KindNotification:
		c.notification(ctx, msg)
	case jsonrpc.KindResponse:
		c.response(ctx, msg)
	}
}

func (c *clientSession) request(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.MethodIs(protocol.MethodPing) {
		out.Reply(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{}`)))
		return
	}
	p := c.register(msg.Bytes(msg.ID), out)
	if p == nil {
		return
	}
	c.requestPrincipal(ctx)
	method := msg.MethodName()
	for k := range numKinds {
		if method == kindInfo[k].method {
			cursor, _, hasCursor := findString(msg.Raw, "params", "cursor")
			c.spawn(p, func(ctx context.Context) { c.list(ctx, p, k, cursor, hasCursor) })
			return
		}
	}
	switch method {
	case protocol.MethodInitialize:
		params := bytes.Clone(paramsOf(msg.Raw))
		c.spawn(p, func(ctx context.Context) { c.initialize(ctx, p, params) })
	case protocol.MethodLoggingSetLevel:
		params := bytes.Clone(paramsOf(msg.Raw))
		c.spawn(p, func(ctx context.Context) { c.setLevel(ctx, p, params) })
	case protocol.MethodToolsCall:
		c.routeName(ctx, p, msg, kindTools, "params", "name")
	case protocol.MethodPromptsGet:
		c.routeName(ctx, p, msg, kindPrompts, "params", "name")
	case protocol.MethodCompletionComplete:
		c.routeCompletion(ctx, p, msg)
	case protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		c.routeURI(ctx, p, msg, "params", "uri")
	default:
		c.routeOther(ctx, p, msg)
	}
}

// register records a request in flight, or answers it at once when the
// session is closed or the id is already in flight (its answers could not
// be told apart).
func (c *clientSession) register(id []byte, out conn.Stream) *pending {
	c.e.inflight.Add(1)
	p := &pending{c: c, member: -1}
	p.call = conn.Call[*pending]{ID: bytes.Clone(id), Out: out, Cancel: p.release, Data: p}
	c.mu.Lock()
	var refusal []byte
	switch {
	case c.closed:
		refusal = jsonrpc.ErrorResponse(id, protocol.CodeServerError, c.closeText)
	case c.calls.ByID(id) != nil:
		refusal = jsonrpc.ErrorResponse(id, protocol.CodeInvalidRequest, "mcpgate: a request with this id is already in flight")
	case !c.calls.Add(&p.call): // closed after closed was set: cannot happen
		refusal = jsonrpc.ErrorResponse(id, protocol.CodeServerError, c.closeText)
	}
	c.mu.Unlock()
	if refusal != nil {
		c.e.inflight.Add(-1)
		out.Reply(refusal)
		return nil
	}
	return p
}

// release ends the endpoint's work for p once its call ended, however it
// ended (the table runs it once, before the answer goes out): its timer,
// its goroutine's context, its count in flight.
func (p *pending) release() {
	c := p.c
	c.mu.Lock()
	t, cancel := p.timer, p.cancel
	c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if cancel != nil {
		cancel()
	}
	c.e.inflight.Add(-1)
}

// spawn runs the endpoint's work for p on a goroutine, with a context
// ended when p is answered (or the session closes).
func (c *clientSession) spawn(p *pending, work func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	// Under mu, as release reads p.cancel: either release sees it, or
	// the call ended before and this sees that.
	if p.call.Done() {
		c.mu.Unlock()
		cancel()
		return
	}
	p.cancel = cancel
	c.mu.Unlock()
	go work(ctx)
}

// finish answers p with msg (nil: cancelled) unless it was answered
// already, and reports whether it did. deliver false ends it silently
// (its client left).
func (c *clientSession) finish(p *pending, msg []byte, deliver bool) bool {
	if !deliver {
		return p.call.End()
	}
	return p.call.Reply(msg)
}

// answer answers p with a result.
func (c *clientSession) answer(p *pending, result []byte) {
	c.finish(p, jsonrpc.Response(p.call.ID, result), true)
}

// fail answers p with an error.
func (c *clientSession) fail(p *pending, err error) {
	var re *rpcError
	if !errors.As(err, &re) {
		re = &rpcError{protocol.CodeInternalError, err.Error()}
	}
	c.finish(p, jsonrpc.ErrorResponse(p.call.ID, re.Code, re.Message), true)
}

// Abandon ends the requests whose replies were to go to out without a
// reply (their client left and cannot resume), cancelling them upstream.
func (c *clientSession) Abandon(out conn.Stream) {
	type abandoned struct {
		p    *pending
		conn conn.Conn
	}
	c.mu.Lock()
	var mine []abandoned
	for _, cl := range c.calls.On(out) {
		p := cl.Data
		a := abandoned{p: p}
		if p.mc != nil {
			a.conn = p.mc.conn
		}
		mine = append(mine, a)
	}
	c.mu.Unlock()
	for _, a := range mine {
		if a.conn != nil {
			a.conn.Abandon(a.p) // cancelled upstream, without a reply
		}
		c.finish(a.p, nil, false)
	}
}

// Close ends the session: every member's session, then every request of
// the client still in flight is answered with an error. Nothing waits on
// a member (their Close does not).
func (c *clientSession) Close() { c.CloseWith("") }

// CloseWith is Close telling the requests in flight why the session ended.
func (c *clientSession) CloseWith(reason string) {
	text := "mcpgate: session closed"
	if reason != "" {
		text = "mcpgate: " + strings.TrimPrefix(reason, "mcpgate: ")
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.closeText = true, text
	if c.flush != nil {
		c.flush.Stop()
		c.flush = nil
	}
	// Under mu: whoever sees the session closed sees its work ended too,
	// and answers nothing but what Close says.
	c.stop()
	c.mu.Unlock()
	c.e.forget(c)
	c.closeMembers(reason)
	c.calls.Close(protocol.CodeServerError, text)
}

// closeMembers ends every member's session, telling it why. A member
// session still opening (join) closes itself when it sees the session
// closed.
func (c *clientSession) closeMembers(reason string) {
	c.mu.Lock()
	conns := make([]conn.Conn, 0, len(c.members))
	for _, mc := range c.members {
		if mc != nil && mc.conn != nil {
			conns = append(conns, mc.conn)
		}
	}
	c.mu.Unlock()
	for _, mconn := range conns {
		mconn.CloseWith(reason)
	}
}

// visibleLocked reports whether member i is up in this session and its
// server ready: its items are listed and its names routed. Called with
// c.mu held.
func (c *clientSession) visibleLocked(i int) bool {
	mc := c.members[i]
	return mc.ready && mc.up && mc.conn != nil
}

// unavailable is the error for a request to member mc while it is not
// visible: removed from the endpoint, its state, or why its session
// failed.
func (c *clientSession) unavailable(mc *member, failed string) error {
	name, i := mc.m.Name, mc.i
	if mc.removed {
		return errorf(protocol.CodeInvalidParams, "%s", removedReason(name, c.e.opts.Name))
	}
	if st := c.e.state(i); !st.ready {
		return errorf(protocol.CodeServerError, "server %q is not available: %s", name, st.text)
	}
	if failed == "" {
		failed = "it is not initialized in this session"
	}
	return errorf(protocol.CodeServerError, "server %q is not available: %s", name, failed)
}
