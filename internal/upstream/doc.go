// Package upstream owns the connection to one MCP server. This file set covers
// the stdio transport: [Stdio] spawns the server as a child process, writes
// newline-delimited JSON-RPC messages to its stdin, hands every stdout line to
// a [Handler], logs its stderr, restarts it after a crash, and stops it the way
// the MCP specification asks (close stdin, then SIGTERM, then SIGKILL) when it
// is closed. It knows nothing of JSON-RPC beyond line framing; matching
// replies to requests is the caller's job (internal/mux).
//
// # Ownership and goroutines
//
// A Stdio runs one supervisor goroutine for its whole life. Each process
// generation adds four goroutines, all owned by the Stdio and all waited for by
// Close:
//   - the reader, the only reader of the child's stdout and the only caller of
//     the Handler, so Handler calls never overlap;
//   - the writer, the only writer of the child's stdin, fed by a bounded queue;
//   - the stderr logger;
//   - the waiter, which notices the leader's exit without reaping it, kills
//     what is left of the process group and bounds how long stdout may stay
//     open afterwards.
//
// # Locking
//
// Stdio.mu guards the current process, the generation counter and the closed
// flag; it is never held during I/O or while calling the Handler. A process's
// sigMu orders "send a signal to the group" before "reap the leader", so a
// signal never reaches a recycled process group. Counters are atomics.
//
// # Process groups
//
// Every child is the leader of its own process group (Setpgid) and gets
// SIGKILL if the gateway dies (Pdeathsig). Stop signals go to the whole group,
// so the grandchildren of launchers such as npx -> sh -> node die too, and
// after any exit of the leader the group gets SIGKILL to reap leftovers. The
// leader is reaped only after that, which keeps the group id from being reused
// while we may still signal it.
package upstream
