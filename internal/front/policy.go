package front

import (
	"errors"

	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file applies the targets' policies (Config.Policies): what each
// principal may list and use. A target with a policy has its Backend
// wrapped, so every way a request reaches it (a session's POST, a legacy
// /messages POST, a stateless request and its retries) passes here: a
// request naming an item the principal may not use is answered with a
// JSON-RPC error and never reaches the server, and the replies to list
// requests lose the items it may not see.

// Policy kinds, as Policy takes them.
const (
	policyTool     = "tool"
	policyPrompt   = "prompt"
	policyResource = "resource"
)

// CodePolicyDenied is the JSON-RPC error code of a request a policy
// refuses: invalid params, as for an unknown tool, since to the principal
// the item does not exist.
const CodePolicyDenied = protocol.CodeInvalidParams

// listKinds maps a list method to its items' kind, the result's array
// and the member naming each item.
var listKinds = map[string]struct{ kind, array, key string }{
	protocol.MethodToolsList:             {policyTool, "tools", "name"},
	protocol.MethodPromptsList:           {policyPrompt, "prompts", "name"},
	protocol.MethodResourcesList:         {policyResource, "resources", "uri"},
	protocol.MethodResourcesTemplateList: {policyResource, "resourceTemplates", "uriTemplate"},
}

// policyOf returns the policy of a target key (a server's name, or
// EndpointKey of an endpoint) in the current targets (nil: none), and
// whether they serve that key at all.
type policyOf func(key string) (conn.Policy, bool)

// targetPolicy is a target's policy as its connections apply it: looked
// up when each request arrives, never kept from the session's open, so
// that a reload that adds, tightens or lifts a policy applies to the open
// sessions at once (sessions outlive reloads).
type targetPolicy struct {
	target string
	policy func(key string) conn.Policy
}

// guard wraps be under the policy of target, as current has it when each
// request arrives. Every target is wrapped, with a policy or not: one may
// be added by a reload while its sessions are open.
func guard(be conn.Backend, target string, current func(key string) conn.Policy) conn.Backend {
	return conn.Wrap(be, (&targetPolicy{target: target, policy: current}).layer)
}

// layer puts a connection opened with ctx under the policy: its general
// stream loses the resource updates the principal may not see
// (policy_streams.go), its requests are judged (guardedConn).
func (tp *targetPolicy) layer(ctx context.Context, general conn.Stream) (conn.Stream, conn.Middleware) {
	p := conn.Principal(ctx)
	return tp.updates(p, general), func(c conn.Conn) conn.Conn {
		return &guardedConn{Conn: c, policy: tp.policy, target: tp.target, principal: p}
	}
}

// guardedConn is a Conn under its target's policy.
type guardedConn struct {
	conn.Conn
	policy    func(key string) conn.Policy // looked up per request
	target    string
	principal *auth.Principal // the session's, for requests without one in their context

	mu    sync.Mutex
	lists map[conn.Stream]map[*listStream]struct{} // list requests in flight, by the stream they answer on (made on first use)
}

// Handle refuses a request naming an item the principal may not use, and
// filters the reply of a list request.
func (c *guardedConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	var pol conn.Policy
	if msg.Kind == jsonrpc.KindRequest && out != nil {
		pol = c.policy(c.target)
	}
	p := conn.Principal(ctx)
	if p == nil {
		p = c.principal
	}
	method := msg.MethodName()
	if pol == nil {
		if method == protocol.MethodSubscriptionsListen && out != nil {
			// Its updates are judged as they come: a reload may add a
			// policy while it is open.
			out = c.track(&listStream{Stream: out, c: c, p: p})
		}
		c.Conn.Handle(ctx, msg, out)
		return
	}
	if lk, ok := listKinds[method]; ok {
		// Even a list left whole is one other principals do not get: its
		// cacheScope, if any, becomes "private".
		c.Conn.Handle(ctx, msg, c.track(&listStream{Stream: out, c: c, pol: pol, p: p, kind: lk.kind, array: lk.array, key: lk.key, all: pol.AllowsAll(p, lk.kind)}))
		return
	}
	if method == protocol.MethodSubscriptionsListen {
		// A listen of 2026-07-28 subscribes to resources by URI, and its
		// stream carries their updates.
		if err := c.checkListen(pol, p, msg); err != nil {
			out.Reply(jsonrpc.ErrorResponse(msg.Bytes(msg.ID), CodePolicyDenied, err.Error()))
			return
		}
		c.Conn.Handle(ctx, msg, c.track(&listStream{Stream: out, c: c, pol: pol, p: p}))
		return
	}
	kind, name, args, ok, err := named(method, msg)
	if err != nil {
		out.Reply(jsonrpc.ErrorResponse(msg.Bytes(msg.ID), protocol.CodeInvalidParams, err.Error()))
		return
	}
	if ok && !pol.Allows(p, kind, name, args) {
		out.Reply(jsonrpc.ErrorResponse(msg.Bytes(msg.ID), CodePolicyDenied, c.denial(p, kind, name)))
		return
	}
	c.Conn.Handle(ctx, msg, out)
}

// Abandon abandons the list requests answering on out too.
func (c *guardedConn) Abandon(out conn.Stream) {
	c.mu.Lock()
	ls := c.lists[out]
	delete(c.lists, out)
	c.mu.Unlock()
	for l := range ls {
		c.Conn.Abandon(l)
	}
	c.Conn.Abandon(out)
}

// named returns the item a request names, for the requests that use one;
// an error for params that do not say unambiguously (params.go), or a
// completion of a ref of no known type (it cannot be checked).
func named(method string, msg *jsonrpc.Message) (kind, name string, args json.RawMessage, ok bool, err error) {
	switch method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet, protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe, protocol.MethodCompletionComplete:
	default:
		return "", "", nil, false, nil
	}
	cp, err := conn.ReadParams(msg)
	if err != nil {
		return "", "", nil, false, err
	}
	switch method {
	case protocol.MethodToolsCall:
		return policyTool, cp.Name, json.RawMessage(cp.Arguments), true, nil
	case protocol.MethodPromptsGet:
		return policyPrompt, cp.Name, json.RawMessage(cp.Arguments), true, nil
	case protocol.MethodCompletionComplete:
		switch cp.Ref.Type {
		case "ref/prompt":
			return policyPrompt, cp.Ref.Name, nil, true, nil
		case "ref/resource":
			return policyResource, cp.Ref.URI, nil, true, nil
		}
		return "", "", nil, false, errors.New("mcpgate: params.ref.type must be \"ref/prompt\" or \"ref/resource\"")
	}
	return policyResource, cp.URI, nil, true, nil
}

// denial is the message of a request refused by the policy.
func (c *guardedConn) denial(p *auth.Principal, kind, name string) string {
	text := "mcpgate: " + kind + " " + strconv.Quote(name) + " is not allowed"
	if p != nil {
		text += " for " + strconv.Quote(p.Name)
	}
	return text + " by the policy of " + describe(c.target)
}
