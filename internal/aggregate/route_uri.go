package aggregate

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file routes a request naming a resource URI (resources/read,
// subscriptions, a completion's resource ref) to the member that lists it,
// directly or through a template.

// routeURI routes a request naming a resource URI at path (resources/read,
// subscribe, unsubscribe: params.uri; completion/complete: params.ref.uri)
// to the member that lists it, or a template matching it.
func (c *clientSession) routeURI(ctx context.Context, p *pending, msg *jsonrpc.Message, path ...string) {
	uri, _, ok := findString(msg.Raw, path...)
	if !ok {
		c.fail(p, errorf(protocol.CodeInvalidParams, "%s is required (a string)", strings.Join(path, ".")))
		return
	}
	if msg.MethodIs(protocol.MethodResourcesUnsubscribe) {
		c.unsubscribed(uri)
	}
	c.mu.Lock()
	known := c.completeLocked(kindResources) && c.completeLocked(kindTemplates)
	i, err := -1, error(nil)
	if known {
		i, err = c.resolveURILocked(uri)
	}
	c.mu.Unlock()
	if known {
		if err != nil {
			c.fail(p, err)
			return
		}
		c.forwardURI(ctx, p, i, msg, uri)
		return
	}
	raw := bytes.Clone(msg.Raw)
	c.spawn(p, func(ctx context.Context) {
		c.ensure(ctx, kindResources, kindTemplates)
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		i, err := c.resolveURILocked(uri)
		c.mu.Unlock()
		if err != nil {
			c.fail(p, err)
			return
		}
		m, _ := jsonrpc.Parse(raw)
		c.forwardURI(ctx, p, i, &m, uri)
	})
}

// resolveURILocked finds the member serving a resource URI: the one that
// lists it, else the one with a template matching it, else the only
// member with resources at all (a server may serve URIs it does not
// list). The URI must pass the member's filters and the endpoint's.
// Called with c.mu held.
func (c *clientSession) resolveURILocked(uri string) (int, error) {
	v, err := c.viewLocked(kindResources)
	if err != nil {
		return -1, err
	}
	tv, err := c.viewLocked(kindTemplates)
	if err != nil {
		return -1, err
	}
	owners, byTemplate := ownersOf(uri, v, tv)
	allowed := owners[:0]
	for _, i := range owners {
		if c.allowed(i, kindResources, uri) {
			allowed = append(allowed, i)
		}
	}
	switch {
	case len(allowed) == 1:
		return allowed[0], nil
	case len(allowed) > 1:
		how := "lists"
		if byTemplate {
			how = "has a template matching"
		}
		names := make([]string, len(allowed))
		for j, i := range allowed {
			names[j] = fmt.Sprintf("%q", c.members[i].m.Name)
		}
		return -1, errorf(protocol.CodeInvalidParams, "resource %q is ambiguous in endpoint %q: each of servers %s %s it",
			uri, c.e.opts.Name, strings.Join(names, ", "), how)
	}
	only, n := -1, 0
	var down []string
	for i, mc := range c.members {
		switch {
		case c.visibleLocked(i) && mc.caps.has(kindResources):
			only, n = i, n+1
		case !c.visibleLocked(i):
			if c.listedBeforeLocked(i, uri) {
				return -1, c.unavailable(mc, mc.failed)
			}
			down = append(down, fmt.Sprintf("%q", mc.m.Name))
		}
	}
	if n == 1 && len(owners) == 0 && c.allowed(only, kindResources, uri) {
		return only, nil
	}
	text := fmt.Sprintf("resource %q not found: no server of endpoint %q lists it or a template matching it", uri, c.e.opts.Name)
	if len(down) > 0 {
		text += " (not available, so not searched: " + strings.Join(down, ", ") + ")"
	}
	return -1, errorf(protocol.CodeResourceNotFound, "%s", text)
}

// listedBeforeLocked reports whether member i, not visible now, listed
// uri (or a template matching it) when it was. Called with c.mu held.
func (c *clientSession) listedBeforeLocked(i int, uri string) bool {
	if !c.allowed(i, kindResources, uri) {
		return false
	}
	mc := c.members[i]
	if l := mc.lists[kindResources].list; l != nil {
		for _, it := range l.items {
			if it.key == uri {
				return true
			}
		}
	}
	if l := mc.lists[kindTemplates].list; l != nil {
		for _, it := range l.items {
			if re := templateRegexp(it.key); it.key == uri || re != nil && re.MatchString(uri) {
				return true
			}
		}
	}
	return false
}
