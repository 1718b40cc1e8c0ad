package aggregate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file routes a client's request to the member that owns what it
// names (a tool, a prompt, a completion's ref; resource URIs in
// route_uri.go), and forwards it there.

// routeName routes a request naming a tool or prompt at path (tools/call
// and prompts/get: params.name; completion/complete: params.ref.name),
// with the member's own name put back. When the session does not know
// every member's names yet, they are loaded first, off the client's path.
func (c *clientSession) routeName(ctx context.Context, p *pending, msg *jsonrpc.Message, k kind, path ...string) {
	name, span, ok := findString(msg.Raw, path...)
	if !ok {
		c.fail(p, errorf(protocol.CodeInvalidParams, "%s is required (a string)", strings.Join(path, ".")))
		return
	}
	c.mu.Lock()
	known := c.completeLocked(k)
	var en entry
	var err error
	if known {
		en, err = c.resolveNameLocked(k, name)
	} else {
		en, known = c.certainLocked(k, name)
	}
	c.mu.Unlock()
	if known {
		c.forwardName(ctx, p, msg, name, span, en, err)
		return
	}
	raw := bytes.Clone(msg.Raw)
	c.spawn(p, func(ctx context.Context) {
		c.awaitOwner(ctx, k, name)
		if ctx.Err() != nil {
			return // answered: cancelled, abandoned or closed
		}
		c.mu.Lock()
		en, err := c.resolveNameLocked(k, name)
		c.mu.Unlock()
		m, _ := jsonrpc.Parse(raw) // parsed before
		c.forwardName(ctx, p, &m, name, span, en, err)
	})
}

// certainLocked returns the owner of name when the lists loaded so far
// settle it: a member listed it, and no member whose list is still
// loading can expose it (each has a non-empty prefix, kept whole by
// shortening, that name does not start with). A member that is slow to
// list (or stuck) then delays only calls that could be its own. Called
// with c.mu held.
func (c *clientSession) certainLocked(k kind, name string) (entry, bool) {
	v, err := c.viewLocked(k)
	if err != nil {
		return entry{}, false
	}
	en, ok := v.byName[name]
	if !ok {
		return entry{}, false
	}
	for j, mc := range c.members {
		if !c.visibleLocked(j) || !mc.caps.has(k) || mc.lists[k].loaded || mc.lists[k].err != nil {
			continue // its names are known, or it has none to give
		}
		pre := c.e.naming.exposedPrefix(mc.m.Prefix)
		if pre == "" || len(pre) > c.e.naming.max-hashLen || strings.HasPrefix(name, pre) {
			return entry{}, false
		}
	}
	return en, true
}

// awaitOwner loads the visible members' lists of kind k (as ensure does)
// and waits until every one is known or name's owner is certain
// (certainLocked), whichever comes first, or ctx ends.
func (c *clientSession) awaitOwner(ctx context.Context, k kind, name string) {
	for {
		c.mu.Lock()
		if c.closed || c.completeLocked(k) {
			c.mu.Unlock()
			return
		}
		if _, ok := c.certainLocked(k, name); ok {
			c.mu.Unlock()
			return
		}
		var waits []chan struct{}
		for i, mc := range c.members {
			if !c.visibleLocked(i) || !mc.caps.has(k) || mc.lists[k].loaded {
				continue
			}
			waits = append(waits, c.loadingLocked(mc, k))
		}
		c.mu.Unlock()
		if len(waits) == 0 {
			return
		}
		// The first load to end may settle it: wait for any.
		one := make(chan struct{}, len(waits))
		for _, w := range waits {
			go func() {
				select {
				case <-w:
					one <- struct{}{}
				case <-ctx.Done():
				}
			}()
		}
		select {
		case <-one:
		case <-ctx.Done():
			return
		}
	}
}

// forwardName forwards a request naming name at span to its owner en,
// under the owner's own name.
func (c *clientSession) forwardName(ctx context.Context, p *pending, msg *jsonrpc.Message, name string, span jsonrpc.Span, en entry, err error) {
	if err != nil {
		c.fail(p, err)
		return
	}
	if err := c.permitCall(msg, en); err != nil {
		c.fail(p, err)
		return
	}
	if en.key != name {
		m, err := jsonrpc.Parse(replaceString(msg.Raw, span, en.key))
		if err != nil {
			c.fail(p, err) // unreachable: a string replaced by a string
			return
		}
		msg = &m
	}
	c.forward(ctx, p, en.member, msg)
}

// resolveNameLocked finds the owner of an exposed tool or prompt name.
// A filtered name is unknown, like one nobody has. Called with c.mu held.
func (c *clientSession) resolveNameLocked(k kind, name string) (entry, error) {
	v, err := c.viewLocked(k)
	if err != nil {
		return entry{}, err
	}
	if en, ok := v.byName[name]; ok {
		return en, nil
	}
	noun := kindInfo[k].noun
	if ens, ok := v.collisions[name]; ok {
		return entry{}, errorf(protocol.CodeInvalidParams,
			"%s %q is ambiguous in endpoint %q: servers %s all expose it, so it is left out (give them different prefixes, or filter one out)",
			noun, name, c.e.opts.Name, c.e.describe(ens))
	}
	for i, mc := range c.members {
		visible := c.visibleLocked(i)
		if visible && (!mc.caps.has(k) || mc.lists[k].loaded) || !c.belongsLocked(i, k, name) {
			continue
		}
		if err := mc.lists[k].err; visible && err != nil {
			return entry{}, errorf(protocol.CodeServerError, "server %q did not list its %ss: %s", mc.m.Name, noun, strings.TrimPrefix(err.Error(), "mcpgate: "))
		}
		if visible {
			// Its list changed while the session loaded it.
			return entry{}, errorf(protocol.CodeServerError, "server %q is listing its %ss again; retry", mc.m.Name, noun)
		}
		return entry{}, c.unavailable(mc, mc.failed)
	}
	return entry{}, errorf(protocol.CodeInvalidParams, "unknown %s %q", noun, name)
}

// belongsLocked reports whether an exposed name is member i's, as far as
// the session can tell without its list: it carries the member's prefix,
// or the member listed it before it went down. Called with c.mu held.
func (c *clientSession) belongsLocked(i int, k kind, name string) bool {
	m := c.members[i].m
	if pre := c.e.naming.exposedPrefix(m.Prefix); pre != "" && strings.HasPrefix(name, pre) {
		return true
	}
	if l := c.members[i].lists[k].list; l != nil {
		for _, it := range l.items {
			if c.allowed(i, k, it.key) && c.e.naming.expose(m.Prefix, it.key) == name {
				return true
			}
		}
	}
	return false
}

// routeCompletion routes completion/complete by its ref: a prompt's by the
// prompt's name, a resource template's by its URI.
func (c *clientSession) routeCompletion(ctx context.Context, p *pending, msg *jsonrpc.Message) {
	switch typ, _, _ := findString(msg.Raw, "params", "ref", "type"); typ {
	case "ref/prompt":
		c.routeName(ctx, p, msg, kindPrompts, "params", "ref", "name")
	case "ref/resource":
		c.routeURI(ctx, p, msg, "params", "ref", "uri")
	default:
		c.fail(p, errorf(protocol.CodeInvalidParams, `params.ref.type must be "ref/prompt" or "ref/resource"`))
	}
}

// routeOther routes a method the endpoint does not merge: to the one
// member there is, if there is one up; otherwise there is no telling
// whose it is.
func (c *clientSession) routeOther(ctx context.Context, p *pending, msg *jsonrpc.Message) {
	up := c.upMembers()
	live := c.liveMembers()
	switch {
	case len(up) == 1:
		c.forward(ctx, p, up[0].i, msg)
		return
	case len(live) == 1:
		c.forward(ctx, p, live[0].i, msg) // down: forward says so
		return
	}
	c.fail(p, errorf(protocol.CodeMethodNotFound, "method %q is not served by endpoint %q, which merges %d servers", msg.MethodName(), c.e.opts.Name, len(live)))
}

// forward hands a client request to member i, answered there on p, within
// the member's Timeout.
func (c *clientSession) forward(ctx context.Context, p *pending, i int, msg *jsonrpc.Message) {
	c.mu.Lock()
	mc := c.members[i]
	// Under mu, as release reads p.timer: either release sees the timer,
	// or the call ended before and this sees that.
	if p.call.Done() {
		c.mu.Unlock()
		return
	}
	if !c.visibleLocked(i) {
		failed := mc.failed
		c.mu.Unlock()
		c.fail(p, c.unavailable(mc, failed))
		return
	}
	p.member, p.mc = i, mc
	mconn := mc.conn
	if d := mc.m.Timeout; d > 0 {
		p.timer = time.AfterFunc(d, func() {
			// The member's call ends first, by its stream (p), not by
			// its id: once the client hears of the timeout it may reuse
			// the id at once, and a cancellation by id sent after would
			// end that new call, or the member would refuse it as a
			// duplicate (found by the fault tests). A member that has
			// answered already has nothing to abandon.
			mconn.Abandon(p)
			text := fmt.Sprintf("mcpgate: request timed out: server %q did not answer within %v", mc.m.Name, d)
			c.finish(p, jsonrpc.ErrorResponse(p.call.ID, protocol.CodeRequestTimeout, text), true)
		})
	}
	c.mu.Unlock()
	mconn.Handle(ctx, msg, p)
	// Answered while the member was taking it (the client left or
	// cancelled, the timeout passed, before the member had registered
	// the call, so their cancellation found nothing there): end it at
	// the member now, or it would run there with nobody to answer (found
	// by the fault tests). A no-op when the member answered it.
	if p.call.Done() {
		mconn.Abandon(p)
	}
}

// permitCall checks a call of member en.member's tool or prompt en.key
// against the member's policy with the call's arguments (lists checked it
// without them).
func (c *clientSession) permitCall(msg *jsonrpc.Message, en entry) error {
	pol := c.e.policy(en.member)
	if pol == nil {
		return nil
	}
	var kind string
	switch {
	case msg.MethodIs(protocol.MethodToolsCall):
		kind = "tool"
	case msg.MethodIs(protocol.MethodPromptsGet):
		kind = "prompt"
	default:
		return nil
	}
	cp, err := conn.ReadParams(msg) // strictly: what the member will read
	if err != nil {
		return errorf(protocol.CodeInvalidParams, "%s", strings.TrimPrefix(err.Error(), "mcpgate: "))
	}
	p := c.who()
	if pol.Allows(p, kind, en.key, json.RawMessage(cp.Arguments)) {
		return nil
	}
	who := ""
	if p != nil {
		who = fmt.Sprintf(" for %q", p.Name)
	}
	return errorf(protocol.CodeInvalidParams, "%s %q is not allowed%s by the policy of server %q", kind, en.key, who, c.e.member(en.member).Name)
}
