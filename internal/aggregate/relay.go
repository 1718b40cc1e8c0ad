package aggregate

import (
	"context"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is the traffic between members and the client that is not a
// client request's answer: what members send (server requests, progress,
// log messages, notifications) and the client's answers and notifications
// back to them.

// listChangedDelay coalesces a burst of list changes (several members
// restarting at once, a member announcing each of many changes) into one
// notification per kind.
const listChangedDelay = 20 * time.Millisecond

// memberGeneral is the general stream a member's session gets: what the
// member sends outside the client's requests.
type memberGeneral struct {
	c  *clientSession
	mc *member
}

func (g memberGeneral) Send(msg []byte) {
	m, err := jsonrpc.Parse(msg)
	if err != nil {
		return // the members' sessions send valid JSON-RPC
	}
	if !g.c.attached(g.mc) {
		return // a member removed or renewed since: it has nothing more to tell
	}
	i := g.mc.i
	if m.Kind == jsonrpc.KindNotification {
		// A member's list changed: the endpoint's did too, and what it
		// knows of the member's is stale. One notification per kind goes
		// to the client, for all members at once.
		for k := range numKinds {
			if m.MethodIs(kindInfo[k].changed) {
				g.c.listChanged(i, kindSet(1)<<k|sameNotification(k))
				return
			}
		}
		// A resource the member's filters or policy hide (since a
		// reload, maybe: its subscription at the member was made before)
		// is not the client's to hear of, as it is not its to read
		// (found by the fault tests).
		if m.MethodIs(protocol.NotificationResourcesUpdated) {
			if uri, _, ok := findString(m.Raw, "params", "uri"); ok && !g.c.allowed(i, kindResources, uri) {
				return
			}
		}
	}
	g.c.relayParsed(g.mc, &m, g.c.general)
}

// Reply is not used on a general stream by the members' sessions; a reply
// there belongs to nobody the endpoint knows.
func (g memberGeneral) Reply([]byte) {}

// sameNotification returns the other kinds announced by the same
// notification as k (resources and their templates).
func sameNotification(k kind) kindSet {
	if k == kindResources || k == kindTemplates {
		return 1<<kindResources | 1<<kindTemplates
	}
	return 0
}

// relay sends a message of the session's member mc to the client on
// out, with the ids of its server requests (and of its cancellations of
// them) made the endpoint's: two members, or a member and the one that
// replaced it, may use the same ids.
func (c *clientSession) relay(mc *member, msg []byte, out conn.Stream) {
	m, err := jsonrpc.Parse(msg)
	if err != nil || mc == nil {
		return // the members' sessions send valid JSON-RPC, for requests forwarded to them
	}
	c.relayParsed(mc, &m, out)
}

// relayParsed is relay of a message parsed already.
func (c *clientSession) relayParsed(mc *member, m *jsonrpc.Message, out conn.Stream) {
	msg := m.Raw
	switch {
	case m.Kind == jsonrpc.KindRequest:
		msg = jsonrpc.Splice(nil, msg, jsonrpc.Edit{Span: m.ID, Value: encodeServerID(mc.i, mc.gen, m.Bytes(m.ID))})
	case m.Kind == jsonrpc.KindNotification && m.MethodIs(protocol.NotificationCancelled) && m.CancelRequestID.Present():
		msg = jsonrpc.Splice(nil, msg, jsonrpc.Edit{Span: m.CancelRequestID, Value: encodeServerID(mc.i, mc.gen, m.Bytes(m.CancelRequestID))})
	}
	out.Send(msg)
}

// response carries the client's answer to a server request back to the
// member that asked, with the member's id; an answer to a member replaced
// or removed since reaches nobody (the member that asked is gone).
func (c *clientSession) response(ctx context.Context, msg *jsonrpc.Message) {
	i, gen, id, ok := decodeServerID(msg.Bytes(msg.ID), c.memberCount())
	if !ok {
		c.e.log.Debug("client answered an unknown server request", "id", string(msg.Bytes(msg.ID)))
		return
	}
	back, err := jsonrpc.Parse(jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.ID, Value: id}))
	c.mu.Lock()
	var mconn conn.Conn
	if mc := c.members[i]; mc.gen == gen {
		mconn = mc.conn
	}
	c.mu.Unlock()
	if mconn == nil {
		c.e.log.Debug("client answered a server request of a member replaced or removed since", "id", string(msg.Bytes(msg.ID)))
		return
	}
	if err == nil {
		mconn.Handle(ctx, &back, nil)
	}
}

// notification routes a client notification: a cancellation to the member
// that has the request, the rest (initialized, roots/list_changed,
// progress of a server request) to every member up.
func (c *clientSession) notification(ctx context.Context, msg *jsonrpc.Message) {
	if msg.MethodIs(protocol.NotificationCancelled) {
		c.cancel(ctx, msg)
		return
	}
	c.mu.Lock()
	if msg.MethodIs(protocol.NotificationInitialized) {
		c.initialized = true // members initialized later get it then
	}
	var to []conn.Conn
	for _, mc := range c.members {
		if mc.up && mc.conn != nil {
			to = append(to, mc.conn)
		}
	}
	c.mu.Unlock()
	for _, mconn := range to {
		mconn.Handle(ctx, msg, nil)
	}
}

// cancel ends a request the client cancelled: a forwarded one through its
// member (which tells its server and ends it without a reply), one the
// endpoint works on here.
func (c *clientSession) cancel(ctx context.Context, msg *jsonrpc.Message) {
	if !msg.CancelRequestID.Present() {
		return
	}
	c.mu.Lock()
	cl := c.calls.ByID(msg.Bytes(msg.CancelRequestID))
	var p *pending
	var mconn conn.Conn
	if cl != nil {
		p = cl.Data
		if p.mc != nil {
			mconn = p.mc.conn
		}
	}
	c.mu.Unlock()
	if p == nil {
		return
	}
	if mconn != nil {
		mconn.Handle(ctx, msg, nil)
	}
	c.finish(p, nil, true) // if the member did not already
}

// cancelUpstream tells a member's session that the request with id is
// over for the endpoint (its timeout passed): it ends it without a reply.
func cancelUpstream(mconn conn.Conn, id []byte, reason string) {
	params := append(append([]byte(`{"requestId":`), id...), `,"reason":`...)
	params = append(append(params, quote(reason)...), '}')
	msg, err := jsonrpc.Parse(jsonrpc.Notification(protocol.NotificationCancelled, params))
	if err == nil {
		mconn.Handle(context.Background(), &msg, nil)
	}
}

// listChanged records that member i's lists of kinds changed: they are
// loaded again when next needed, and the client is told (once for a
// burst). A member that is not visible changes nothing the client sees.
func (c *clientSession) listChanged(i int, kinds kindSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mc := c.members[i]
	for k := range numKinds {
		if kinds.has(k) {
			mc.lists[k].reset()
		}
	}
	if mc.m.SharedLists {
		c.e.invalidate(listsKey{i, mc.gen}, kinds)
	}
	c.epoch++
	if c.visibleLocked(i) {
		c.notifyLocked(kinds)
	}
}

// notifyLocked schedules list_changed notifications of kinds for the
// client. Called with c.mu held.
func (c *clientSession) notifyLocked(kinds kindSet) {
	if c.closed || c.version == "" || kinds == 0 {
		return // before initialize the client lists what there is anyway
	}
	c.changed |= kinds
	if c.flush == nil {
		c.flush = time.AfterFunc(listChangedDelay, c.sendChanged)
	}
}

// sendChanged sends the list_changed notifications due.
func (c *clientSession) sendChanged() {
	c.mu.Lock()
	kinds := c.changed
	c.changed, c.flush = 0, nil
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	for k := range numKinds {
		if kinds.has(k) && (k != kindTemplates || !kinds.has(kindResources)) {
			c.general.Send(jsonrpc.Notification(kindInfo[k].changed, nil))
		}
	}
}

// memberState is called by the endpoint when member i (of generation
// gen) becomes ready or stops being ready (seq counts these changes: an
// older one is ignored). Its items leave or join the lists (the client is
// told); a member this session has not initialized yet is initialized now.
func (c *clientSession) memberState(i int, gen uint64, ready bool, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || i >= len(c.members) {
		return // a member the session has not taken yet: it takes its state then
	}
	mc := c.members[i]
	if mc.gen != gen || mc.removed || seq <= mc.seq {
		return
	}
	mc.seq = seq
	if mc.ready == ready {
		return
	}
	was := c.visibleLocked(i)
	mc.ready = ready
	if ready {
		// A member back from a restart may list other things: what the
		// session knew is stale.
		for k := range numKinds {
			mc.lists[k].reset()
		}
		if !mc.up && !mc.initing && mc.conn != nil && c.version != "" {
			c.startInitLocked(mc)
		}
	}
	c.epoch++
	if was != c.visibleLocked(i) {
		c.notifyLocked(mc.caps.kinds())
		if ready {
			c.applyLevelLocked(mc)
		}
	}
}

// upMembers returns the members visible in this session.
func (c *clientSession) upMembers() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up []*member
	for i, mc := range c.members {
		if c.visibleLocked(i) {
			up = append(up, mc)
		}
	}
	return up
}
