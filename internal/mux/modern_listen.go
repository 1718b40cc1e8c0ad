package mux

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file serves the subscriptions/listen requests of a Modern Mux's
// clients (modern.go) from one listen of the gateway's own.
//
// Why not forward each client's listen: a stdio process is one session, and
// servers key subscriptions by session. The Go SDK (v1.8.0, mcp/server.go,
// Server.subscriptionsListen) keeps one listen id per session for each
// list_changed kind and per resource URI: the newest listen overwrites the
// others, and ending any listen deletes the session's entries (a deferred
// delete, run before its final result is written). With two clients
// listening only one got notifications, and after either ended neither did.
//
// So the server sees at most one gateway listen per process at a time,
// asking for the union of what the open client listens want (booleans
// OR'd, resourceSubscriptions the union of URIs), with the per-request
// _meta of the revision as the discover probe has it. Each client listen
// gets its own acknowledgement from the Mux, tagged with its own id byte
// for byte: what it asked for, intersected with what the server agreed.
// Each notification of the gateway listen goes to every client listen
// whose agreed filter wants it, retagged with that client's id.
//
// When a client listen wants more than the open gateway listen asked for,
// that listen is cancelled and the next one, with the new union, opened
// only once the server has ended the old one (its final result or its
// notifications/cancelled; at most retireWait): opening first and
// cancelling after would have the old listen's end delete the new one's
// entries on such a server. Client listens open meanwhile get nothing
// until the new listen is acknowledged. The same holds after the last
// client listen ends (its gateway listen is cancelled) and a new one
// comes. A smaller union is never asked for: what a client did not ask
// for is filtered out here.
//
// Ending: a client listen ends when its client cancels it (Abandon,
// notifications/cancelled) or closes; the gateway listen ends with the
// server's final result (each client listen gets it, with its own id), its
// notifications/cancelled (each gets it, then ends without a reply, as a
// forwarded listen did), an error or no acknowledgement within the request
// timeout (each gets the error), or the process's exit (each gets an
// error, like any request in flight; the next client listen opens a
// gateway listen on the new process).
//
// Nothing here waits on the server: the upstream reader only updates the
// tables and delivers to Streams, and a gateway listen is written with
// TrySend, or by a goroutine of its own bounded by its deadline.

// retireWait bounds how long a cancelled gateway listen may take to end
// before the next one is opened anyway: a server that answers the
// cancellation does so within a round trip (the Go SDK writes the final
// result); one that never does delays the next acknowledgement this long.
const retireWait = time.Second

// listenHub is a Modern Mux's listen state. Guarded by Mux.mu.
//
// Invariants: cur and retiring are never both set; while cur is set every
// client listen is served by it (listener.up == cur); a gateway listen is
// open upstream while its call is in Mux.pending.
type listenHub struct {
	clients  map[*listener]struct{} // open client listens
	cur      *upListen              // the gateway listen serving them, acknowledged or not; nil: none
	retiring *upListen              // cancelled, its end not seen yet: nothing opens before it ends
}

// upListen is one subscriptions/listen of the gateway.
type upListen struct {
	call *call
	want eras.Filter // asked for; static
	// guarded by Mux.mu:
	acked  bool
	agreed eras.Filter   // the server's acknowledgement, once acked
	gone   chan struct{} // while retiring: closed when it stops retiring
}

// listener is one client's listen in the hub: its call in the pending
// table, in front of the client's stream (eras.Listener keeps the
// acknowledgement first and nothing after the end).
type listener struct {
	eras.Listener
	call *call       // its call in the pending table
	id   []byte      // the client's raw id (its call's)
	want eras.Filter // what it asked for; static

	// guarded by Mux.mu:
	up     *upListen   // the gateway listen serving it; nil while none is open
	ack    []byte      // its acknowledgement, once the agreement is known
	agreed eras.Filter // what it was acknowledged: what it gets
}

// replyStream returns the Stream the client gave for c: a listen's call
// has its listener in between.
func (c *call) replyStream() conn.Stream {
	if l, ok := c.out.(*listener); ok {
		return l.Out
	}
	return c.out
}

// delivery is a message for a client listen, sent after the lock.
type delivery struct {
	l        *listener
	ack, msg []byte
}

// hubActs is what the hub does after the lock.
type hubActs struct {
	acks     []delivery
	open     *upListen // write its request
	openRq   []byte
	retire   *upListen // cancel it, telling why
	retireRq string
}

// listen registers a client's subscriptions/listen: no deadline, no
// MaxInFlight slot; it is served by the gateway listen (see above) and
// ends without touching the server itself.
func (c *Client) listen(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	m := c.m
	id := msg.Bytes(msg.ID)
	want, ok := eras.RequestedFilter(msg.Raw)
	if !ok {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, "invalid params: subscriptions/listen needs params.notifications (an object)"))
		return
	}
	cl := &call{client: c, listen: true}
	cl.setID(id)
	l := &listener{Listener: eras.Listener{Out: out}, call: cl, id: cl.id, want: want}
	cl.out = l
	cl.onReply = func(*jsonrpc.Message) { m.leave(l) } // every end but the hub's own
	for {
		if err := c.waitReady(ctx); err != nil {
			out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, err.Error()))
			return
		}
		m.mu.Lock()
		if m.closed || m.readyLocked() { // as in forwardCall
			break
		}
		m.mu.Unlock()
	}
	if c.closed || m.closed {
		err := c.closedErrLocked()
		m.mu.Unlock()
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, err.Error()))
		return
	}
	if c.lookupLocked(cl.id) != nil {
		m.mu.Unlock()
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeInvalidRequest, "mcpgate: a request with this id is already in flight"))
		return
	}
	m.registerUntimedLocked(cl)
	c.addLocked(cl)
	m.hub.clients[l] = struct{}{}
	a := m.stepLocked(l)
	m.mu.Unlock()
	m.doHub(a)
}

// leave forgets client listen l, which its client ended.
func (m *Mux) leave(l *listener) {
	l.Stop()
	m.mu.Lock()
	if _, ok := m.hub.clients[l]; !ok {
		m.mu.Unlock() // ended with its gateway listen, or the process
		return
	}
	delete(m.hub.clients, l)
	l.up = nil
	a := m.stepLocked(nil)
	m.mu.Unlock()
	m.doHub(a)
}

// stepLocked brings the gateway listen in line with the client listens
// after a change (arrived: a client listen just registered, or nil).
func (m *Mux) stepLocked(arrived *listener) hubActs {
	var a hubActs
	h := &m.hub
	switch {
	case len(h.clients) == 0:
		if h.cur != nil {
			a.retire, a.retireRq = m.retireLocked(), "no client listens any more"
		}
	case h.retiring != nil || m.closed || !m.readyLocked():
		// The end of the retiring listen (or the process) steps again.
	case h.cur == nil:
		a.open, a.openRq = m.openLocked(h.needLocked())
		for l := range h.clients {
			m.attachLocked(l, &a)
		}
	case arrived != nil && !h.cur.want.Covers(arrived.want):
		a.retire, a.retireRq = m.retireLocked(), "replaced by a listen asking for more"

	case arrived != nil:
		m.attachLocked(arrived, &a)
	}
	return a
}

// needLocked is the union of what the client listens want.
func (h *listenHub) needLocked() eras.Filter {
	var f eras.Filter
	seen := map[string]bool{}
	for l := range h.clients {
		f.Tools = f.Tools || l.want.Tools
		f.Prompts = f.Prompts || l.want.Prompts
		f.Resources = f.Resources || l.want.Resources
		for _, uri := range l.want.URIs {
			if !seen[uri] {
				seen[uri] = true
				f.URIs = append(f.URIs, uri)
			}
		}
	}
	slices.Sort(f.URIs)
	return f
}

// attachLocked has client listen l served by the current gateway listen,
// and acknowledged when that one is.
func (m *Mux) attachLocked(l *listener, a *hubActs) {
	u := m.hub.cur
	l.up = u
	if u.acked && l.ack == nil {
		l.agreed = l.want.Intersect(u.agreed)
		l.ack = eras.AckMessage(l.id, l.agreed)
		a.acks = append(a.acks, delivery{l: l, ack: l.ack})
	}
}

// openLocked registers the next gateway listen, asking for want, and
// returns it with its request. Its acknowledgement is due within the
// request timeout (the deadline list).
func (m *Mux) openLocked(want eras.Filter) (*upListen, []byte) {
	u := &upListen{want: want}
	u.call = &call{
		sent:    true,
		onReply: func(msg *jsonrpc.Message) { m.upEnded(u, msg) },
		// Only Exited and Close fail a call as gone, and they reset the
		// hub with the pending table: nothing left to do.
		onGone: func(error) {},
	}
	m.registerLocked(u.call)
	m.hub.cur = u
	f, _ := json.Marshal(want)
	params := append(append(append([]byte(`{"_meta":`), m.modernMeta()...), `,"notifications":`...), f...)
	return u, jsonrpc.Request(appendUint(nil, u.call.upID), protocol.MethodSubscriptionsListen, append(params, '}'))
}

// retireLocked moves the current gateway listen to retiring (the caller
// cancels it upstream) and arms the bound on its end.
func (m *Mux) retireLocked() *upListen {
	h := &m.hub
	u := h.cur
	h.cur, h.retiring = nil, u
	u.gone = make(chan struct{})
	for l := range h.clients {
		l.up = nil
	}
	if !m.closed {
		m.wg.Add(1) // under mu: Close sets closed under mu before it waits
		go m.retireBound(u)
	}
	return u
}

// retireBound stops waiting for retiring listen u to end after
// retireWait: it is forgotten (a late answer is an unknown reply) and the
// next one opens.
func (m *Mux) retireBound(u *upListen) {
	defer m.wg.Done()
	t := time.NewTimer(retireWait)
	defer t.Stop()
	select {
	case <-u.gone:
		return
	case <-m.ctx.Done():
		return
	case <-t.C:
	}
	m.mu.Lock()
	if m.hub.retiring != u {
		m.mu.Unlock()
		return
	}
	if m.pending[u.call.upID] == u.call {
		delete(m.pending, u.call.upID)
		m.forgetLocked(u.call)
	}
	m.hub.unretireLocked()
	a := m.stepLocked(nil)
	m.mu.Unlock()
	m.log.Debug("a cancelled subscriptions/listen did not end in time; opening the next", "upstream_id", u.call.upID, "waited", retireWait)
	m.doHub(a)
}

// unretireLocked: the retiring listen ended.
func (h *listenHub) unretireLocked() {
	close(h.retiring.gone)
	h.retiring = nil
}

// resetLocked forgets everything (Exited, Close): the pending table, taken
// with it, answers the client listens.
func (h *listenHub) resetLocked() {
	if h.retiring != nil {
		h.unretireLocked()
	}
	h.cur = nil
	h.clients = map[*listener]struct{}{}
}

// ownLocked returns the gateway listen with upstream id id that is still
// open (cur or retiring), or nil.
func (m *Mux) ownLocked(id uint64) *upListen {
	for _, u := range []*upListen{m.hub.cur, m.hub.retiring} {
		if u != nil && u.call.upID == id && m.pending[id] == u.call {
			return u
		}
	}
	return nil
}

// doHub does, after the lock, what stepLocked decided.
func (m *Mux) doHub(a hubActs) {
	for _, d := range a.acks {
		d.l.Deliver(d.ack, nil)
	}
	if u := a.retire; u != nil {
		params := append(append(append([]byte(`{"requestId":`), appendUint(nil, u.call.upID)...), `,"reason":`...), strconv.Quote(a.retireRq)...)
		m.trySendGen(u.call.gen, jsonrpc.Notification(protocol.NotificationCancelled, append(params, '}')), protocol.NotificationCancelled)
	}
	if u := a.open; u != nil {
		j := job{upID: u.call.upID, deadline: u.call.deadline}
		if m.tryWrite(u.call.gen, a.openRq) == nil {
			return
		}
		msg := a.openRq
		if !m.spawn(func() {
			if err := m.sendPending(context.Background(), msg, j); err != nil {
				m.writeFailed(j.upID, err)
			}
		}) {
			m.writeFailed(j.upID, errClosed)
		}
	}
}

// upEnded ends gateway listen u, already out of the pending table, with
// end: the server's final result or error (or the Mux's own: a timeout,
// a failed write), or its notifications/cancelled. The client listens it
// served end with it; a retiring one lets the next open.
func (m *Mux) upEnded(u *upListen, end *jsonrpc.Message) {
	m.mu.Lock()
	h := &m.hub
	var ended []*listener
	var acks [][]byte
	switch u {
	case h.cur:
		h.cur = nil
		calls := make([]*call, 0, len(h.clients))
		for l := range h.clients {
			delete(h.clients, l)
			ended, acks, calls = append(ended, l), append(acks, l.ack), append(calls, l.call)
		}
		m.takeLocked(calls) // never written: nothing to cancel
	case h.retiring:
		h.unretireLocked()
	default:
		m.mu.Unlock()
		return
	}
	a := m.stepLocked(nil)
	m.mu.Unlock()
	cancelled := end.Kind == jsonrpc.KindNotification
	var tag jsonrpc.Span
	switch {
	case len(ended) == 0:
	case cancelled:
		tag, _ = eras.SubscriptionSpan(end.Raw, "params")
	default:
		tag, _ = eras.SubscriptionSpan(end.Raw, "result")
	}
	for i, l := range ended {
		if cancelled {
			l.End(acks[i], jsonrpc.Splice(nil, end.Raw, jsonrpc.Edit{Span: end.CancelRequestID, Value: l.id}, jsonrpc.Edit{Span: tag, Value: l.id}), nil)
			continue
		}
		l.End(nil, nil, jsonrpc.Splice(nil, end.Raw, jsonrpc.Edit{Span: end.ID, Value: l.id}, jsonrpc.Edit{Span: tag, Value: l.id}))
	}
	m.doHub(a)
}

// toListen routes a notification tagged with subscription id span: the
// current gateway listen's acknowledgement, or one of its deliveries.
func (m *Mux) toListen(msg *jsonrpc.Message, span jsonrpc.Span) {
	id, ok := parseUint(msg.Raw[span.Start:span.End])
	method := msg.MethodName()
	ack := method == protocol.NotificationSubscriptionsAcknowledged
	var uri string
	if method == protocol.NotificationResourcesUpdated {
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(paramsOf(msg.Raw), &p)
		uri = p.URI
	}
	var out []delivery
	acked := false
	m.mu.Lock()
	u := m.hub.cur
	switch {
	case !ok || u == nil || m.ownLocked(id) != u:
		// A retiring listen's, or no listen's: not for any client now.
	case ack && !u.acked:
		out, acked = m.ackedLocked(u, msg), true
	case u.acked && !ack:
		for l := range m.hub.clients {
			if l.up == u && l.agreed.Wants(method, uri) {
				out = append(out, delivery{l: l, ack: l.ack})
			}
		}
	}
	m.mu.Unlock()
	if len(out) == 0 && !acked {
		m.stats.droppedNotes.Add(1)
		m.log.Debug("subscription notification for no client listen dropped", "method", method)
		return
	}
	for _, d := range out {
		if !ack {
			d.msg = jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: span, Value: d.l.id})
		}
		d.l.Deliver(d.ack, d.msg)
	}
}

// ackedLocked records the server's acknowledgement of gateway listen u,
// which now has no deadline, and returns the acknowledgements of the
// client listens waiting for it. An acknowledgement without notifications
// is taken as agreeing to what was asked.
func (m *Mux) ackedLocked(u *upListen, msg *jsonrpc.Message) []delivery {
	agreed, ok := eras.RequestedFilter(msg.Raw)
	if !ok {
		agreed = u.want
	}
	u.acked, u.agreed = true, agreed
	m.unlinkLocked(u.call)
	var out []delivery
	for l := range m.hub.clients {
		if l.up == u && l.ack == nil {
			l.agreed = l.want.Intersect(agreed)
			l.ack = eras.AckMessage(l.id, l.agreed)
			out = append(out, delivery{l: l, ack: l.ack})
		}
	}
	return out
}

// listenCancelled is the server's notifications/cancelled, which in this
// revision only ends a listen: a gateway listen's ends it (see upEnded).
func (m *Mux) listenCancelled(msg *jsonrpc.Message) {
	id, ok := parseUint(msg.Bytes(msg.CancelRequestID))
	m.mu.Lock()
	var u *upListen
	if ok {
		u = m.ownLocked(id)
	}
	if u == nil {
		m.mu.Unlock()
		m.stats.droppedNotes.Add(1)
		return
	}
	delete(m.pending, id)
	m.forgetLocked(u.call)
	m.mu.Unlock()
	m.upEnded(u, msg)
}
