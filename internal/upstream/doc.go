// Package upstream defines what the gateway needs from a connection to one
// MCP server, whatever carries it: [Upstream], which a multiplexer
// (internal/mux) writes to, and [Handler], which the connection reports
// what the server sends to. It holds contracts only; the two kinds live
// side by side beneath it:
//
//   - internal/upstream/stdio: a supervised child process speaking
//     newline-delimited JSON-RPC on stdin and stdout. Each start is a new
//     generation; the supervisor restarts a process that exits (with
//     backoff, reset by Served) and kills one on Restart. It has a PID.
//   - internal/upstream/remote: a client session with a remote server over
//     Streamable HTTP or the HTTP+SSE transport of 2024-11-05. A lost SSE
//     event stream ends a generation and a reconnected one starts the next;
//     there is no process to kill, so CanRestart is false, Restart and
//     Served do nothing, and PID is 0. A failed initialize is retried by
//     the multiplexer on the same generation instead.
//
// What the two share, and this package states once: ordered delivery of
// whole JSON-RPC messages to a Handler, one call at a time, per
// generation (Started, Line or Oversized..., Exited); sends that never
// wait on the server beyond the caller's context (TrySend never waits at
// all); and generation-restricted sends, so that an answer meant for one
// generation (a reply to its server request, the gateway's initialize of
// it) never reaches its successor in the window before the owner hears
// of the exit.
//
// What they do not share stays in their packages: the process
// supervision, stderr and stop sequence of stdio; the transport choice,
// session renewal and resumption of remote. The stateless client of
// 2026-07-28 (remote.Stateless) is not an Upstream: it carries one
// request per HTTP exchange with the client's own id, is never
// multiplexed and has no generations, so servers call it directly.
//
// # Who calls what
//
// internal/servers starts an upstream with the Mux as its Handler, then
// gives it to the Mux (mux.SetUpstream); the Mux alone writes to it from
// then on, and the servers package alone closes it. The upstream calls
// the Handler from its own goroutines, never concurrently.
//
// # Concurrency
//
// Every Upstream method is safe for concurrent use, including with the
// upstream's Close and from inside a Handler method, and none retains
// msg. Only Send and SendGen may block, and only for room in a bounded
// queue, until their ctx ends. The locking rules of each kind are in its
// package comment; this package has no state and no locks.
package upstream
