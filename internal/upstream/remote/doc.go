// Package remote owns the client side of one connection to a remote MCP
// server over HTTP: Streamable HTTP (protocol 2025-03-26 and later) or the
// legacy HTTP+SSE transport of 2024-11-05, or "auto", which tries the first
// and falls back to the second the way the specification's backwards
// compatibility section describes. A [Client] is an upstream.Upstream: it
// plugs into the multiplexer (internal/mux) exactly like a stdio process
// (internal/upstream/stdio): the owner calls Send and Close, and the Client
// reports what the server sends to a [Handler]. It cannot restart (a
// remote session has no process to replace). Like stdio, it knows JSON-RPC
// only as far as it must: ids,
// to match replies to the POSTs that carried their requests, and the
// initialize exchange, to learn the session and the protocol version.
// A Streamable HTTP session can outlive its Client: Config.OnSession
// tells the owner each session the Client starts, and a Client started
// with Config.Resume carries on with one another Client initialized
// (resume.go), so that any replica of the gateway can serve it.
//
// [Stateless] is the client side of the stateless revision (2026-07-28): no
// session, no initialize; [Stateless.Discover] asks a server whether it
// speaks that revision, and [Stateless.Do] POSTs one request as its caller
// gives it (ids untouched: each request has a POST, and its answer comes
// back on that POST's response), with the revision's headers, and reports
// what comes back. It shares this package's HTTP client, headers, size
// limit and error texts, starts no goroutines and keeps no state.
//
// # Ownership and goroutines
//
// Every goroutine is started by the Client and waited for by Close:
//   - one per message sent (Send returns at once): it POSTs the message and
//     reads the response, a JSON body or an SSE stream, resuming that stream
//     with GET and Last-Event-ID when it drops before the reply;
//   - Streamable HTTP: one standalone GET stream per upstream session,
//     reconnected with backoff until the session ends or Close;
//   - legacy SSE: one reader of the event stream, which learns the endpoint
//     to POST to and reconnects (a new generation) when the stream drops.
//
// Messages are ordered as they were given to Send: a POST starts only after
// the previous message's request was written, and after a notification or
// response only once its status arrived (so notifications/initialized is
// accepted before the next request reaches the server). In auto mode, the
// first initialize decides the transport; a message that starts before one
// was answered is POSTed as Streamable HTTP, so that it too gets an answer.
//
// # Bounds
//
// Send and TrySend never block. Each exchange has its own context:
// notifications/cancelled for a request, or Close, aborts it at once, so
// that its connection and goroutine are released. A JSON body or SSE event
// over Config.MaxMessageBytes is not read further: the stream is aborted
// (closed) and the request it answers fails.
//
// # Locking
//
// Client.mu guards the transport state (mode, session, generation, the set
// of request ids awaiting a reply, the legacy connection); it is never held
// during I/O or while calling the Handler. Client.deliverMu serialises the
// Handler calls of all the goroutines above, so they never overlap; it is
// held only while a Handler method runs.
package remote
