package aggregate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// A request of the stateless revision (2026-07-28) to an endpoint is served
// by a session of the endpoint of its own, initialized by the gateway with
// the capabilities the request declares, for as long as the request runs:
// the HTTP front translates it for that session as it does for a server of
// the session eras (the _meta keys stripped, resultType and the caching
// fields added, server/discover built from the merged initialize result,
// subscriptions/listen served from the session's list_changed, a member's
// request to the client turned into input_required). So everything the
// endpoint does for sessions (names, merged lists and cursors, filters,
// routing, hidden members) holds for stateless clients unchanged.
//
// Each member's session comes from Member.OpenStateless when it has one:
// a connection on the processes that serve the member's own stateless
// requests (its translation processes; for a member of 2026-07-28, a
// reverse-bridge session over its stateless connections), so a stateless
// request costs no session-era process or upstream session. A member
// without one (a remote of the legacy transport) opens a session as a
// client's would.

// statelessClient is the clientInfo of the sessions the gateway opens for
// stateless requests.
const statelessClient = `{"name":"mcpgate (2026-07-28 client)","version":"0"}`

// OpenStateless opens the connection of one stateless request: an endpoint
// session initialized with caps (raw JSON; {} when empty), bounded by ctx.
// It fails when a critical member cannot be initialized, as initialize does.
func (e *Endpoint) OpenStateless(ctx context.Context, general conn.Stream, _ string, caps []byte) (conn.StatelessConn, error) {
	if len(bytes.TrimSpace(caps)) == 0 || caps[0] != '{' {
		caps = []byte(`{}`)
	}
	c, err := e.openSession(ctx, general, true, caps)
	if err != nil {
		return conn.StatelessConn{}, err
	}
	params := fmt.Appendf(nil, `{"protocolVersion":%q,"capabilities":%s,"clientInfo":%s}`, protocol.LatestSessionVersion, caps, statelessClient)
	msg, err := jsonrpc.Parse(jsonrpc.Request(e.internalID(), protocol.MethodInitialize, params))
	if err != nil { // caps came from a parsed request: cannot happen
		c.Close()
		return conn.StatelessConn{}, err
	}
	out := &replyOnce{ch: make(chan []byte, 1)}
	c.Handle(ctx, &msg, out)
	var reply []byte
	select {
	case reply = <-out.ch:
	case <-ctx.Done():
		c.Close()
		return conn.StatelessConn{}, ctx.Err()
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply, &r); err != nil || (r.Error == nil && len(r.Result) == 0) {
		c.Close()
		return conn.StatelessConn{}, errors.New("mcpgate: endpoint " + e.opts.Name + ": no initialize result")
	}
	if r.Error != nil {
		c.Close()
		return conn.StatelessConn{}, errors.New(r.Error.Message)
	}
	note, _ := jsonrpc.Parse(jsonrpc.Notification(protocol.NotificationInitialized, nil))
	c.Handle(ctx, &note, nil)
	init := r.Result
	// Passthrough is false: the front translates the request for the
	// session, and builds server/discover from the merged result.
	return conn.NewStatelessConn(c, func(context.Context) ([]byte, error) { return init, nil }, false), nil
}

// ServesStateless is true: an endpoint serves each stateless request with
// a session of its own.
func (e *Endpoint) ServesStateless() bool { return true }

// replyOnce takes the final answer of the gateway's own initialize.
type replyOnce struct{ ch chan []byte }

func (r *replyOnce) Send([]byte) {}
func (r *replyOnce) Reply(msg []byte) {
	select {
	case r.ch <- bytes.Clone(msg):
	default:
	}
}

// Interface guard.
var _ conn.Backend = (*Endpoint)(nil)
