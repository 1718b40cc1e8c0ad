package servers

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// The connections of translated stateless requests, and the relays of
// list_changed between translation processes (see translate.go).

// relay is a client of each translation process that never sends a
// request: it gets the process's broadcasts (list_changed) and hands them
// to the connections of the other translation processes.
type relay struct {
	t  *translation
	tp *translator
}

func (r *relay) Send(msg []byte) {
	if m, err := jsonrpc.Parse(msg); err != nil || m.Kind != jsonrpc.KindNotification || !bytes.HasSuffix(m.Bytes(m.Method), []byte(`/list_changed"`)) {
		return
	}
	var outs []conn.Stream
	r.t.cmu.Lock()
	for c := range r.t.conns {
		if c.tp != r.tp { // its own process's broadcast reached it already
			outs = append(outs, c.general)
		}
	}
	r.t.cmu.Unlock()
	for _, out := range outs {
		out.Send(msg) // streams may share msg: nobody modifies it
	}
}

func (*relay) Reply([]byte) {}

// tconn is the connection of one translated stateless request: a client
// of the translation process it takes on first use.
type tconn struct {
	// Static after construction.
	t       *translation
	general conn.Stream
	version string
	caps    []byte
	set     capSet
	cred    credential // the principal's upstream headers (credentials.go)

	mu sync.Mutex
	// guarded by mu:
	closed bool
	reason string // CloseWith's
	c      *mux.Client
	// tp is c's process: written with c, before c is in t.conns (and so
	// read by relays without mu).
	tp *translator
}

// client returns the connection's client, binding it to a process first
// if it has none.
func (c *tconn) client() (*mux.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.c != nil:
		return c.c, nil
	case c.closed && c.reason != "":
		return nil, &closedError{"mcpgate: " + strings.TrimPrefix(c.reason, "mcpgate: ")}
	case c.closed:
		return nil, &closedError{"mcpgate: session closed"}
	}
	tp, err := c.t.acquire(c.set, c.cred)
	if err != nil {
		return nil, err
	}
	mc := tp.p.m.Join(c.general)
	mc.Stateless(c.version, c.caps)
	c.c, c.tp = mc, tp
	c.t.cmu.Lock()
	c.t.conns[c] = struct{}{}
	c.t.cmu.Unlock()
	return mc, nil
}

// closedError is why a connection closed before its first use refuses.
type closedError struct{ text string }

func (e *closedError) Error() string { return e.text }

func (c *tconn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	mc, err := c.client()
	if err != nil {
		if msg.Kind == jsonrpc.KindRequest { // exactly one answer, even without a process
			out.Reply(jsonrpc.ErrorResponse(msg.Bytes(msg.ID), protocol.CodeServerError, "mcpgate: "+strings.TrimPrefix(err.Error(), "mcpgate: ")))
		}
		return
	}
	mc.Handle(ctx, msg, out)
}

func (c *tconn) ServerInit(ctx context.Context) ([]byte, error) {
	mc, err := c.client()
	if err != nil {
		return nil, err
	}
	return mc.ServerInit(ctx)
}

func (c *tconn) Version() string { return c.version }

func (c *tconn) Passthrough() bool { return false }

func (c *tconn) Abandon(out conn.Stream) {
	c.mu.Lock()
	mc := c.c
	c.mu.Unlock()
	if mc != nil {
		mc.Abandon(out)
	}
}

func (c *tconn) CloseWith(reason string) { c.close(reason) }

func (c *tconn) Close() { c.close("") }

// close closes the client (its requests in flight are answered) and then
// uncounts it from its process; only the first close does anything.
func (c *tconn) close(reason string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.reason = true, reason
	mc, tp := c.c, c.tp
	c.mu.Unlock()
	if mc == nil {
		return
	}
	if reason != "" {
		mc.CloseWith(reason)
	} else {
		mc.Close()
	}
	c.t.release(c, tp)
}

// Interface guards.
var _ statelessConn = (*tconn)(nil)
