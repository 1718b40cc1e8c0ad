package eras

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// A session of the older eras gets list_changed notifications unasked,
// and resources/updated for what it subscribed to; a 2026-07-28 server
// sends them only on a subscriptions/listen. So a reverse session holds
// one listen, for the lists whose changes the server announces and the
// resources the session subscribed to, renewed when that set changes and
// after the server ends it (a restart), until the session ends.

// Listen renewal backoff, after the server ended or refused a listen.
const (
	minRelisten = time.Second
	maxRelisten = 30 * time.Second
)

// subscribe records a resources/subscribe (on) or resources/unsubscribe
// and renews the session's listen for the new set.
func (c *reverseConn) subscribe(msg *jsonrpc.Message, id []byte, on bool) []byte {
	var p struct {
		Params struct {
			URI *string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(msg.Raw, &p) != nil || p.Params.URI == nil {
		return jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, "mcpgate: "+msg.MethodName()+" needs params.uri, a string")
	}
	c.mu.Lock()
	_, had := c.subs[*p.Params.URI]
	if on {
		c.subs[*p.Params.URI] = struct{}{}
	} else {
		delete(c.subs, *p.Params.URI)
	}
	c.mu.Unlock()
	if had != on {
		c.relisten()
	}
	return jsonrpc.Response(id, []byte(`{}`))
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
// (none if the set is empty).
func (c *reverseConn) relisten() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.discover == nil {
		return
	}
	if c.listen != nil {
		c.listen()
		c.listen = nil
	}
	filter := listenNotifications(c.discover, c.subs)
	if filter == nil {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.listen = cancel
	go c.runListen(ctx, filter, c.meta)
}

// runListen holds one listen until ctx ends, renewing it after the server
// ends it. Its notifications go to the session's stream, its
// acknowledgements nowhere.
func (c *reverseConn) runListen(ctx context.Context, filter []byte, meta map[string]json.RawMessage) {
	params := append(append([]byte(`{"notifications":`), filter...), '}')
	backoff := minRelisten
	for ctx.Err() == nil {
		start := time.Now()
		c.listenOnce(ctx, params, meta)
		if ctx.Err() != nil {
			return
		}
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
func (c *reverseConn) listenOnce(ctx context.Context, params []byte, meta map[string]json.RawMessage) {
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
	rs := &replyStream{send: c.notified, final: make(chan []byte, 1)}
	sc.Handle(ctx, &msg, rs)
	select {
	case <-rs.final:
	case <-ctx.Done():
		sc.Abandon(rs)
	}
}

// notified forwards a notification of the session's listen to the
// session's stream; the listen's acknowledgement is the gateway's alone,
// and so is its notifications/cancelled (a server ending the listen says
// so with one, naming the gateway's listen id: the client never sent that
// request, and the listen is renewed).
func (c *reverseConn) notified(raw []byte) {
	msg, err := jsonrpc.Parse(raw)
	if err != nil || msg.Kind != jsonrpc.KindNotification || msg.MethodIs(protocol.NotificationSubscriptionsAcknowledged) ||
		msg.MethodIs(protocol.NotificationCancelled) {
		return
	}
	c.general.Send(raw)
}
