// Package mux multiplexes many client sessions onto one MCP server connection.
//
// A Mux sits between one Upstream (a stdio process, restarted by its owner
// when it crashes) and any number of Clients (one per client session). It
// rewrites every client request id to a gateway-unique number and back, so
// colliding client ids never meet upstream; rewrites progress tokens the same
// way, so progress reaches only its requester; maps cancellations; answers
// ping; reference-counts resource subscriptions; merges logging levels; and
// routes server-to-client requests to the one session they can belong to.
//
// In shared mode the Mux initializes the server once per process generation
// and answers each client's initialize from that result. In exclusive mode
// (session isolation: one process per client) the client's own initialize is
// forwarded, and replayed after a restart.
//
// Invariants kept here: every client request gets exactly one reply on the
// Stream it came with (its result, a timeout, an upstream exit, or nil when the
// client cancelled it); the pending entry is registered before the request is
// written; nothing but list_changed notifications is sent to more than one
// client.
//
// Locking: Mux.mu guards all routing state (pending table, clients, queues,
// subscriptions, levels). It is never held while writing upstream or
// delivering to a Stream; messages are collected under the lock and sent
// after it is released. Upstream handler methods (Started, Line, Oversized,
// Exited) are called by the upstream's single reader goroutine.
package mux
