// Package front is the HTTP front of the gateway: the Streamable HTTP
// transport (protocol versions 2025-11-25, 2025-06-18 and 2025-03-26, and
// initialize from 2024-11-05 clients) at /servers/{name}/mcp, and for
// endpoints merging several servers at /endpoints/{name}/mcp (the default
// endpoint "all" also at /mcp); the legacy HTTP+SSE transport at .../sse
// and .../messages. Sessions are keyed by what their URL serves, so a
// server and an endpoint of the same name never share one (target.go).
//
// A request to a target is admitted first (admission.go wires
// internal/admission in one order: Host, Origin, the target, the principal,
// the version header, the limits, the audit record). A Handler keeps its
// sessions in a session.Directory (Config.Sessions; an in-memory store by
// default) and goes through it for every creation, lookup and deletion;
// values it gives clients to give back (requestState) are sealed with
// Config.Seal's key ring. For each POST it checks Accept, Content-Type, body
// size, session and protocol version, parses the JSON-RPC envelope once,
// asks the limits (admit), and hands each message to the session's Conn (a
// multiplexer client). Replies and the messages related to a request come
// back on that POST's session.Stream; the handler answers with a JSON body
// when the reply is all there is, or switches to an SSE stream as soon as a
// related message (progress, a server request, a log message) arrives first.
// A GET opens the session's standalone stream, or with Last-Event-ID resumes
// the stream the id names. A POST's SSE stream stays resumable for
// Config.ResumeGrace after its last event was written (that last write is
// not flushed: it may be lost with a connection breaking right then); Sweep
// and the session's next POST drop it after that.
//
// What the client sees is decided here and only here: HTTP statuses before a
// response has started; after an SSE stream has started, errors travel as
// JSON-RPC errors on the stream or the stream is closed, never a second
// status line.
package front
