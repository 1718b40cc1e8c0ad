// Package testkit provides test-only fakes for mcpgate's tests: the test binary
// re-executes itself as a fake stdio MCP server (or as a raw line echoer), so
// tests in upstream, mux, front, gateway and e2e talk to a real child process
// over real pipes.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) {
//		testkit.Main() // runs the fake and exits when this process is one
//		goleak.VerifyTestMain(m)
//	}
//
// and start a fake with the command from [Command].
//
// It is also the one home of what tests of several packages wait with and
// share: [WaitFor] (poll a condition) and [Receive] (a channel), both failing
// after [WaitTimeout] with what was awaited, so that only a real block fails
// a test, never a busy machine; [SettleGoroutines]; [Gate], a named pipe
// that holds a fake at a chosen point; [FreeAddr] and [WaitListening] for
// peers that listen on a port of their own; [WriteCert] for TLS; [Clock], a fake clock;
// [SyncBuffer], [Logger] and [LogWriter] for what components log; [RPC],
// the parts of a JSON-RPC message tests look at; [Redis] and [StartRedis], a
// real redis-server per test (from PATH or scripts/redis.sh's .cache/redis)
// that a chaos test can stop and start again on the same address.
// A test proves an order or a bound that only a blocked path reaches, not a
// latency: see [WaitTimeout].
//
// Ownership: this package owns nothing in the test process except what
// [Procs] reads from /proc and the redis-server processes of [StartRedis],
// each killed by its PID at the test's cleanup. The wait helpers keep no state and call their
// condition on the caller's goroutine, so a condition may call t.Fatal. Everything else runs inside the fake child, where
// one goroutine reads stdin, each request is handled in its own goroutine, and
// every write to stdout goes through one mutex so that lines never interleave.
// The fake's shared state (log level, cancelled ids, in-flight requests,
// pending server-to-client requests) is guarded by one mutex, never held while
// writing. Its open subscriptions/listen requests (FakeOptions.Modern) have a
// mutex of their own, held while writing about them, so that a listen's
// acknowledgement, its notifications and its final result stay in order.
//
// Nothing here may be imported by non-test code.
package testkit
