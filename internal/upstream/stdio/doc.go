// Package stdio owns the connection to one MCP server over the stdio
// transport, one of the two kinds of upstream.Upstream (the other is
// internal/upstream/remote): [Stdio] spawns the server as a child process, writes
// newline-delimited JSON-RPC messages to its stdin, hands every stdout line to
// a [Handler], logs its stderr, restarts it after a crash, and stops it the way
// the MCP specification asks (close stdin, then SIGTERM, then SIGKILL) when it
// is closed. It knows nothing of JSON-RPC beyond line framing (and compacting
// a pretty-printed message onto one line); matching replies to requests is
// the caller's job (internal/mux).
//
// # Ownership and goroutines
//
// A Stdio runs one supervisor goroutine for its whole life; it alone starts
// processes and calls Handler.Waiting. Each process generation adds four
// goroutines, all owned by the Stdio and all waited for by Close:
//   - the reader, the only reader of the child's stdout and the only caller of
//     the other Handler methods, so Handler calls never overlap. It never
//     waits for the writer: stdout is read even while stdin is full;
//   - the writer, the only writer of the child's stdin, fed by a bounded queue
//     (Send waits for room until its ctx ends; TrySend never waits);
//   - the stderr logger, which reads stderr to its end whatever the log
//     budget, keeps the last lines for the ExitError, and logs at most
//     StderrBytesPerSec, each line at the level it names (stderr_level.go);
//   - the waiter, which notices the leader's exit without reaping it, kills
//     what is left of the process group and bounds how long stdout may stay
//     open afterwards. It waits on a pidfd in Go's poller, so a live child
//     costs a parked goroutine, not an OS thread (blocking waitid only where
//     the kernel has no pidfds).
//
// # Nothing waits on a server for ever
//
// The stuck rule: a write to stdin that makes no progress for StuckTimeout
// (default 30s; checked every StuckTimeout/8) means the child stopped
// reading. It is logged, the process group gets SIGKILL, queued messages
// are dropped and blocked Sends return, Exited reports an [ExitError] with
// Stuck set, and the supervisor restarts the server. This also breaks the cycle of a child that floods stdout
// without reading stdin while a Handler blocks in Send. A child that closes
// its stdin but runs on is killed the same way at the first failed write. Owners may kill a
// generation themselves with Restart (e.g. a failed initialize).
//
// # Backoff
//
// With Restart set, every exit not asked for by Close, and every start that
// cannot run the command (including the first: StartStdio then still returns
// the Stdio), is followed by Handler.Waiting(why, d) and a sleep of d, with
// d growing exponentially with consecutive failures (equal jitter, capped at
// MaxBackoff). The count starts over only after a process that served a
// request (Served), or stayed up StableAfter (default 30s) and was not
// killed by the gateway (Restart, the stuck rule), so a server that dies or
// hangs in initialize or on its first call cannot restart in a tight loop.
//
// # Locking
//
// Stdio.mu guards the current and latest process, the generation counter and
// the closed flag; it is never held during I/O or while calling the Handler.
// A process's sigMu orders "send a signal to the group" before "reap the
// leader", so a signal never reaches a recycled process group, and guards why
// the gateway killed it. Counters are atomics.
//
// # Process groups
//
// Every child is the leader of its own process group (Setpgid) and gets
// SIGKILL if the gateway dies (Pdeathsig). Stop signals go to the whole group,
// so the grandchildren of launchers such as npx -> sh -> node die too, and
// after any exit of the leader the group gets SIGKILL to reap leftovers. The
// leader is reaped only after that, which keeps the group id from being reused
// while we may still signal it. Pdeathsig reaches only the direct child, so a
// gateway about to exit without stopping its servers (a second signal) calls
// [KillAll] first: every group not yet reaped, of every Stdio, gets SIGKILL.
//
// # Logging
//
// An unexpected exit is not logged here: the Handler gets every fact in the
// ExitError and logs it once, with what the exit failed. A server that needs
// SIGTERM after stdin closed is routine (Info); one that needs SIGKILL, or
// that the gateway kills, is a warning.
package stdio
