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
// The server's lifecycle is a State (starting, ready, backing off with a
// reason, failed; see state.go); while the server is backing off or
// failed, requests are answered at once with an error that names the
// reason.
//
// # Three modes
//
// A Mux runs one of three state machines, fixed by New (mode.go): Options
// selects it, and the branches on it sit at the entries (runGen and
// initializeUpstream for a generation, Client.request and
// Client.notification for a client, serverRequest and serverNotification
// for the server).
//
// Shared (the default): one process for every session. Each generation
// goes Started -> Starting -> the gateway's own initialize (bounded by
// Options.InitTimeout) -> Ready, and its result (initResult, upVersion)
// answers each client's initialize, the version negotiated per session;
// on Ready the sessions' subscriptions and logging level are restored to
// the new process. A failed initialize goes to BackingOff and restarts
// the process (the Upstream's Restart) or, when the Upstream cannot
// restart (a remote session), is retried on the same generation after a
// backoff. State of this mode: the upstream's initialize result, the
// subscription reference counts, the merged logging level, the tasks and
// who created them (tasks.go), and each client's declared capabilities,
// which decide whether a server request may be routed to it.
//
// Exclusive (Options.Exclusive; session isolation, and every remote
// upstream): one session per process. A generation is Ready as soon as it
// starts while the session has not initialized: the client's own
// initialize is forwarded, and kept (Client.init) to be replayed to each
// later generation before it is Ready. The
// session's notifications/initialized reaches each generation exactly
// once (Client.initGen, initWritten: initialized.go). Every server message
// is the session's.
//
// Modern (Options.Modern, modern*.go; Exclusive is then ignored): a server
// that speaks 2026-07-28 itself, shared by clients of that revision. Each
// generation is probed with server/discover, never initialized: found ->
// Ready (the result is kept in discover); answered otherwise -> Failed
// (ErrNotModern; the next generation is probed again); unanswered ->
// BackingOff, the same process probed again later. Requests pass
// untranslated, the clients' subscriptions/listen share one listen of the
// Mux's own per process (hub; the listen's rules, its filter,
// acknowledgement and tag, are internal/eras's), and server requests are
// refused.
//
// Across the modes, a Client is of one of two kinds. A session client
// (Join) has an initialize and a session. A stateless client (Join, then
// Client.Stateless) is the connection of one 2026-07-28 request: it never
// initializes, and names its version and capabilities in the request. On
// a shared Mux a server request may be routed to it as to any session,
// and its caller turns that into an input_required result; on a Modern
// Mux its requests pass through as they are (Client.Passthrough).
//
// # Invariants
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
// (the Upstream's TrySendGen).
package mux
