package aggregate

import (
	"context"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file keeps a session's resource subscriptions across membership
// changed in place (members.go). A member's session holds the client's
// subscriptions to its resources; when a config reload replaces the member
// (or removes it and adds it back) that session ends, and the client,
// which the protocol gives no way to hear that its subscriptions ended,
// would wait for resources/updated that never come (found by the fault
// tests). So the session remembers what it subscribed to through each
// member index, and subscribes the member that takes the index again once
// it is up.

// forwardURI is forward of a request naming uri to member i, noting a
// resources/subscribe first: the client's intent is what a member that
// replaces this one is given, whatever this one answers.
func (c *clientSession) forwardURI(ctx context.Context, p *pending, i int, msg *jsonrpc.Message, uri string) {
	if msg.MethodIs(protocol.MethodResourcesSubscribe) {
		c.mu.Lock()
		c.subs[uri] = i
		c.mu.Unlock()
	}
	c.forward(ctx, p, i, msg)
}

// unsubscribed forgets the client's subscription to uri as soon as it asks,
// before it is routed: also when its member is removed or down (the
// client is answered with an error), a member that takes the index again
// must not be subscribed to it.
func (c *clientSession) unsubscribed(uri string) {
	c.mu.Lock()
	delete(c.subs, uri)
	c.mu.Unlock()
}

// resubscribeLocked sends member mc, up in the session in place of an
// earlier member at its index, the client's subscriptions made through
// that index, off the caller's path (bounded by the member's Timeout and
// the session). A failure is logged: the client still has what it
// would have had from the old member, nothing less. Called with c.mu held.
func (c *clientSession) resubscribeLocked(mc *member) {
	var uris []string
	for uri, i := range c.subs {
		if i == mc.i && c.allowed(i, kindResources, uri) { // the member's policy now
			uris = append(uris, uri)
		}
	}
	if c.closed || len(uris) == 0 {
		return
	}
	go func() {
		ctx, cancel := c.memberCtxOf(c.ctx, mc)
		defer cancel()
		for _, uri := range uris {
			params := append(append([]byte(`{"uri":`), quote(uri)...), '}')
			if _, err := c.callMember(ctx, mc, protocol.MethodResourcesSubscribe, params); err != nil {
				// The URI is the client's: not logged.
				c.e.log.Info("a subscription of a session not renewed on the member that replaced another", "server", mc.m.Name, "err", err)
			}
		}
	}()
}
