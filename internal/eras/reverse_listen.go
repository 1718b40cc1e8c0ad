package eras

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// A session of the older eras gets list_changed notifications unasked,
// and resources/updated for what it subscribed to; a 2026-07-28 server
// sends them only on a subscriptions/listen. So a reverse session holds
// one listen, for the lists whose changes the server announces and the
// resources the session subscribed to, renewed when that set changes and
// after the server ends it (a restart), until the session ends.
//
// A resources/subscribe (or unsubscribe) is answered once the listen for
// the session's new set is in effect: the server acknowledged it, or it
// ended without an acknowledgement (refused; it is renewed in the
// background), or the request's timeout passed. A client of the session
// eras takes the answer to mean it is subscribed, as a server of its era
// answers after recording the subscription; answered before, an update
// the server sent between the answer and its acknowledgement of the new
// listen reached nobody (the server had no listen asking for it yet).
// Listens are numbered (listenGen) and the newest one settled is kept
// (listenSettled): a request waits for the listen of its own change or a
// later one, since each asks for the whole set.

// Listen renewal backoff, after the server ended or refused a listen.
const (
	minRelisten = time.Second
	maxRelisten = 30 * time.Second
)

// subscribeCall answers a resources/subscribe (on) or
// resources/unsubscribe once the session's listen serves its new set (see
// above). The wait is a call of the session: Close answers it, and its
// client may cancel it.
func (c *reverseConn) subscribeCall(msg *jsonrpc.Message, id []byte, on bool, out conn.Stream) {
	var p struct {
		Params struct {
			URI *string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(msg.Raw, &p) != nil || p.Params.URI == nil {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, "mcpgate: "+msg.MethodName()+" needs params.uri, a string"))
		return
	}
	gen := c.subscribe(*p.Params.URI, on)
	ok := jsonrpc.Response(id, []byte(`{}`))
	if c.listenSettledFor(gen) {
		out.Reply(ok)
		return
	}
	ctx, cancel := c.callContext()
	cl := &conn.Call[reverseCall]{ID: id, Out: out, Cancel: cancel}
	if !c.calls.Add(cl) {
		cancel()
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, errReverseClosed.Error()))
		return
	}
	go func() {
		defer c.forget(cl)
		c.awaitListen(ctx, gen)
		if errors.Is(ctx.Err(), context.Canceled) {
			return // Close, its client's cancellation or Abandon ended it
		}
		// After the timeout too: the URI is recorded and the listen asks
		// for it; only the server's acknowledgement is late.
		cl.Reply(ok)
	}()
}

// subscribe records a subscription to uri (on) or its end, renews the
// session's listen if that changed the set, and returns the number of
// the listen that serves the set.
func (c *reverseConn) subscribe(uri string, on bool) uint64 {
	c.mu.Lock()
	_, had := c.subs[uri]
	if on {
		c.subs[uri] = struct{}{}
	} else {
		delete(c.subs, uri)
	}
	c.mu.Unlock()
	if had != on {
		c.relisten()
		c.tell()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listenGen // ours, or a later one asking for the whole set too
}

// listenSettledFor reports whether listen gen, or a later one, is settled.
func (c *reverseConn) listenSettledFor(gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listenSettled >= gen
}

// awaitListen waits until listen gen, or a later one, is settled, or ctx
// ends.
func (c *reverseConn) awaitListen(ctx context.Context, gen uint64) {
	for {
		c.mu.Lock()
		settled, wake := c.listenSettled >= gen, c.listenWake
		c.mu.Unlock()
		if settled {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// settleListen records that listen gen is in effect, or that it will not
// be soon (see above), and wakes the requests waiting for it. A listen
// replaced since settles nothing: an acknowledgement it got after it was
// cancelled says nothing of the set its successor asks for.
func (c *reverseConn) settleListen(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settleListenLocked(gen)
}

func (c *reverseConn) settleListenLocked(gen uint64) {
	if gen != c.listenGen || gen <= c.listenSettled {
		return
	}
	c.listenSettled = gen
	close(c.listenWake)
	c.listenWake = make(chan struct{})
}

// listenNotifications is the notifications member of the session's
// listen: what the server's discover capabilities announce, and the
// subscribed resources if it takes subscriptions; nil when nothing.
func listenNotifications(discover []byte, subs map[string]struct{}) []byte {
	all := Filter{Tools: true, Prompts: true, Resources: true, URIs: slices.Sorted(maps.Keys(subs))}
	f := all.Agreed(discover) // checked when initialize was answered
	if f.Empty() {
		return nil
	}
	b, _ := json.Marshal(f)
	return b
}

// relisten replaces the session's listen with one for its current set
// (none if the set is empty), numbered by listenGen.
func (c *reverseConn) relisten() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listenGen++
	gen := c.listenGen
	if c.closed || c.discover == nil {
		c.settleListenLocked(gen) // nothing to listen with (yet)
		return
	}
	if c.listen != nil {
		c.listen()
		c.listen = nil
	}
	filter := listenNotifications(c.discover, c.subs)
	if filter == nil {
		c.settleListenLocked(gen)
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.listen = cancel
	go c.runListen(ctx, gen, filter, c.meta)
}

// runListen holds listen gen until ctx ends, renewing it after the server
// ends it. Its notifications go to the session's stream; its
// acknowledgements settle it.
func (c *reverseConn) runListen(ctx context.Context, gen uint64, filter []byte, meta map[string]json.RawMessage) {
	params := append(append([]byte(`{"notifications":`), filter...), '}')
	backoff := minRelisten
	for ctx.Err() == nil {
		start := time.Now()
		c.listenOnce(ctx, gen, params, meta)
		if ctx.Err() != nil {
			return // replaced (the next one settles) or closed
		}
		// Ended or refused before it was acknowledged: the requests
		// waiting for it are answered, not held through the backoff.
		c.settleListen(gen)
		if time.Since(start) > maxRelisten {
			backoff = minRelisten // it served a while: not a refusal loop
		}
		c.log.Debug("the server ended a reverse session's listen; renewing it", "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, maxRelisten)
	}
}

// listenOnce runs one listen until the server ends it or ctx ends.
func (c *reverseConn) listenOnce(ctx context.Context, gen uint64, params []byte, meta map[string]json.RawMessage) {
	sc, err := c.open(ctx, c.general)
	if err != nil {
		return
	}
	defer sc.Close()
	if ctx.Err() != nil { // renewed or closed while opening: no listen nobody holds
		return
	}
	req, err := jsonrpc.Parse(jsonrpc.Request(c.nextID("listen"), protocol.MethodSubscriptionsListen, params))
	if err != nil {
		return
	}
	raw, err := BridgeRequest(&req, req.Bytes(req.ID), meta, nil)
	if err != nil {
		return
	}
	msg, err := jsonrpc.Parse(raw)
	if err != nil {
		return
	}
	rs := &replyStream{send: func(raw []byte) { c.notified(gen, raw) }, final: make(chan []byte, 1)}
	sc.Handle(ctx, &msg, rs)
	select {
	case <-rs.final:
	case <-ctx.Done():
		sc.Abandon(rs)
	}
}

// notified forwards a notification of listen gen to the session's
// stream; the listen's acknowledgement is the gateway's alone (it settles
// the listen), and so is its notifications/cancelled (a server ending the
// listen says so with one, naming the gateway's listen id: the client
// never sent that request, and the listen is renewed).
func (c *reverseConn) notified(gen uint64, raw []byte) {
	msg, err := jsonrpc.Parse(raw)
	switch {
	case err != nil || msg.Kind != jsonrpc.KindNotification || msg.MethodIs(protocol.NotificationCancelled):
	case msg.MethodIs(protocol.NotificationSubscriptionsAcknowledged):
		c.settleListen(gen)
	default:
		c.general.Send(raw)
	}
}
