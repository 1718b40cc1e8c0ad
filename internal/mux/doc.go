// Package mux multiplexes many client sessions onto one MCP server connection.
//
// A Mux sits between one Upstream (a stdio process, restarted by its owner
// when it crashes, or a remote session) and any number of Clients (one per
// client session). It rewrites every client request id to a gateway-unique
// number and back, so colliding client ids never meet upstream; rewrites
// progress tokens the same way, so progress reaches only its requester;
// maps cancellations; answers ping; reference-counts resource
// subscriptions; merges logging levels; and routes server-to-client
// requests to the one session they can belong to.
//
// In shared mode the Mux initializes the server once per process generation
// (bounded by Options.InitTimeout) and answers each client's initialize from
// that result. In exclusive mode (session isolation: one process per client)
// the client's own initialize is forwarded, and replayed after a restart.
// The server's lifecycle is a State (starting, ready, backing off with a
// reason, failed; see state.go): a failed initialize restarts the process
// (through the Upstream's optional Restart) or is retried after a backoff;
// while the server is backing off or failed, requests are answered at once
// with an error that names the reason.
//
// A Modern Mux (Options.Modern, modern.go) serves clients of protocol
// version 2026-07-28 on a server that speaks it itself: it never
// initializes, but probes each process generation with server/discover
// (Discovered reports the outcome: ready, or not such a server), forwards
// requests untranslated, serves its clients' subscriptions/listen from one
// listen of its own per process (fanned out by filter, each client's id
// restored; the listen's rules, its filter, acknowledgement and tag, are
// internal/eras's, which the mux imports), and refuses server requests.
//
// Invariants kept here: every client request gets exactly one reply on the
// Stream it came with (its result, a timeout, an upstream exit, a
// session-closed error from Client.Close, or nil when the client cancelled
// it or Abandon said it left); the pending entry is registered before the
// request is written; nothing but list_changed notifications is sent to more
// than one client. In shared mode a log message, another notification with
// no token or subscription, or a server request reaches a session only when
// it is the one session with a request written to the process (and, for a
// server request, declared the matching client capability); otherwise it is
// dropped (or refused) and counted.
//
// Nothing on the timer, reader, teardown or shutdown paths waits on the
// server: only a client request's own goroutine may wait for room in the
// upstream's queue, bounded by its context and deadline. Timeouts and
// Client.Close answer the caller first, then cancel upstream best effort
// (TrySend; what cannot be queued is dropped and counted in
// Stats.DroppedSends). See send.go.
//
// Locking: Mux.mu guards all routing state (pending table, clients, queues,
// subscriptions, levels, state). It is never held while writing upstream or
// delivering to a Stream; messages are collected under the lock and sent
// after it is released. Upstream handler methods (Started, Line, Oversized,
// Exited) are called by the upstream's single reader goroutine, Waiting by
// its supervisor; they never block on the server, and may come before
// SetUpstream (what needs an answer then is dropped and counted). Answers
// to a server's requests go only to the process generation that asked
// (the Upstream's optional TrySendGen).
package mux
