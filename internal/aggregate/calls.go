package aggregate

import (
	"context"
	"errors"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file holds the endpoint's own requests to members (call,
// callMember) and the time limits that bound them.

// internalCall is the Stream of a request of the endpoint's own to member i.
type internalCall struct {
	c     *clientSession
	mc    *member
	reply chan []byte
}

func (ic *internalCall) Send(msg []byte) { ic.c.relay(ic.mc, msg, ic.c.general) }

func (ic *internalCall) Reply(msg []byte) {
	select {
	case ic.reply <- msg:
	default:
	}
}

// call sends a request of the endpoint's own (an id of its own, which no
// client can guess) to member i and returns its result, or an error: the
// member's error answer, or a timeout when ctx ends first.
func (c *clientSession) call(ctx context.Context, i int, method string, params []byte) ([]byte, error) {
	return c.callMember(ctx, c.memberAt(i), method, params)
}

// callMember is call to the session's member mc (which may have been
// removed or renewed since: then its session is closed, and answers so).
func (c *clientSession) callMember(ctx context.Context, mc *member, method string, params []byte) ([]byte, error) {
	c.mu.Lock()
	mconn := mc.conn
	c.mu.Unlock()
	if mconn == nil {
		return nil, errorf(protocol.CodeServerError, "server %q has no session", mc.m.Name)
	}
	i := mc.i
	id := c.e.internalID()
	msg, err := jsonrpc.Parse(jsonrpc.Request(id, method, params))
	if err != nil {
		return nil, err // unreachable: params are built or checked JSON
	}
	ic := &internalCall{c: c, mc: mc, reply: make(chan []byte, 1)}
	c.e.inflight.Add(1)
	defer c.e.inflight.Add(-1)
	mconn.Handle(ctx, &msg, ic)
	select {
	case r := <-ic.reply:
		if ctx.Err() == nil {
			if r == nil {
				return nil, errorf(protocol.CodeServerError, "%s of server %q was cancelled", method, mc.m.Name)
			}
			return resultOf(r)
		}
	case <-ctx.Done():
		cancelUpstream(mconn, id, "mcpgate: no longer waited for")
	}
	return nil, c.ended(ctx, i, method)
}

// ended is the error of a request of the endpoint's own to member i that
// ctx ended: its time limit, or the session's end.
func (c *clientSession) ended(ctx context.Context, i int, method string) error {
	name := c.e.member(i).Name
	var dl deadline
	if errors.As(context.Cause(ctx), &dl) && c.ctx.Err() == nil {
		return errorf(protocol.CodeRequestTimeout, "server %q did not answer %s within %v", name, method, dl.d)
	}
	return errorf(protocol.CodeServerError, "%s of server %q ended: %v", method, name, context.Cause(ctx))
}

// deadline is the cause of a context ended by a time limit of d.
type deadline struct{ d time.Duration }

func (d deadline) Error() string { return "no answer within " + d.d.String() }

// memberCtx bounds the endpoint's work with member i: the member's
// Timeout, and the session.
func (c *clientSession) memberCtx(i int) (context.Context, context.CancelFunc) {
	return c.memberCtxFrom(c.ctx, i)
}

func (c *clientSession) memberCtxFrom(ctx context.Context, i int) (context.Context, context.CancelFunc) {
	return c.memberCtxOf(ctx, c.memberAt(i))
}

// memberCtxOf bounds ctx by member mc's Timeout.
func (c *clientSession) memberCtxOf(ctx context.Context, mc *member) (context.Context, context.CancelFunc) {
	if d := mc.m.Timeout; d > 0 {
		return context.WithTimeoutCause(ctx, d, deadline{d})
	}
	return context.WithCancel(ctx)
}
