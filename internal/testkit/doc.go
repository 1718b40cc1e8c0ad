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
// Ownership: this package owns nothing in the test process except what
// [Procs] reads from /proc. Everything else runs inside the fake child, where
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
