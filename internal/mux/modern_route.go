package mux

import (
	"bytes"
	"context"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file routes the messages of a Modern Mux (see modern.go). Requests
// are forwarded as in shared mode, ids and progress tokens rewritten, with
// no initialize, level or subscription bookkeeping: each request carries
// its version and capabilities itself. What differs:
//
//   - Requests and notifications the revision removed are not forwarded.
//   - subscriptions/listen is not forwarded: the clients' listens are
//     served from one listen of the gateway's own (modern_listen.go), whose
//     notifications, tagged with params._meta["io.modelcontextprotocol/
//     subscriptionId"], go to each client listen that wants them with the
//     client's own id in the tag, byte for byte. No deadline, no
//     MaxInFlight slot. The server's notifications/cancelled ends a listen.
//   - Server requests do not exist in the revision (a server asks for
//     input with an input_required result): they are refused.
//   - Untagged notifications route as in shared mode: progress by token,
//     list_changed to everyone, the rest (log messages included: a modern
//     server sends one only for a request that asked) to the one client
//     with a request in flight, else dropped and counted.

// removedNotification reports whether msg is a client notification that
// 2026-07-28 removed; a Modern Mux drops them.
func removedNotification(msg *jsonrpc.Message) bool {
	for _, name := range protocol.RemovedNotifications {
		if msg.MethodIs(name) {
			return true
		}
	}
	return false
}

// modernRequest routes a client request on a Modern Mux.
func (c *Client) modernRequest(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	// A request the revision removed is answered "method not found" here:
	// a dual-era server must not see it (after initialize a Go SDK process
	// serves the session eras' way; a level or a subscription would be
	// global to the process).
	for _, name := range protocol.RemovedRequests {
		if msg.MethodIs(name) {
			out.Reply(jsonrpc.ErrorResponse(msg.Bytes(msg.ID), protocol.CodeMethodNotFound,
				"method not found: "+name+" is not part of protocol version "+protocol.StatelessVersion))
			return
		}
	}
	if msg.MethodIs(protocol.MethodSubscriptionsListen) {
		c.listen(ctx, msg, out) // modern_listen.go
		return
	}
	c.forward(ctx, msg, out, nil)
}

// refuseModern answers a server request on a Modern Mux with an error: the
// revision has none (stdio: "the server MUST NOT write JSON-RPC requests").
func (m *Mux) refuseModern(gen uint64, upID []byte, msg *jsonrpc.Message) {
	m.stats.unroutable.Add(1)
	if ok, n := m.warnUnroutable.allow(); ok {
		m.log.Warn("server request refused: protocol version "+protocol.StatelessVersion+" has no server requests",
			"method", msg.MethodName(), "suppressed", n)
	}
	m.trySendGen(gen, jsonrpc.ErrorResponse(upID, protocol.CodeMethodNotFound,
		"mcpgate: "+msg.MethodName()+": clients of protocol version "+protocol.StatelessVersion+" take no requests; return input_required"),
		"refusal of a server request")
}

// modernNotification routes a notification from a Modern Mux's server.
func (m *Mux) modernNotification(msg *jsonrpc.Message) {
	if msg.MethodIs(protocol.NotificationCancelled) {
		// Ends a listen, tagged with its subscription or not.
		m.listenCancelled(msg)
		return
	}
	span, tagged := eras.SubscriptionSpan(msg.Raw, "params")
	switch {
	case span.Present():
		m.toListen(msg, span)
	case tagged:
		// Tagged with something that is no request id: it belongs to no
		// listen, and must reach nobody else.
		m.stats.droppedNotes.Add(1)
		m.log.Debug("notification with an invalid subscriptionId dropped", "method", msg.MethodName())
	case msg.MethodIs(protocol.NotificationProgress):
		m.progress(msg)
	case bytes.HasSuffix(msg.Bytes(msg.Method), []byte(`/list_changed"`)):
		m.broadcast(bytes.Clone(msg.Raw))
	default:
		m.toAttributed(msg)
	}
}
