// Package echoserver is the benchmark fixture behind cmd/mcpecho: a minimal
// MCP server whose one tool, echo, returns its message argument as text, so
// that a load generator can check every reply against its caller.
//
// It serves the same messages over two transports: newline-delimited
// JSON-RPC on stdio ([ServeStdio], what the gateway runs as a child) and
// Streamable HTTP at /mcp ([Handler], the no-proxy baseline the gateway is
// measured against). The HTTP transport behaves like the gateway's front on
// the paths a benchmark takes: sessions with Mcp-Session-Id, a JSON body for
// sessions of 2025-06-18 and older, an SSE stream opened by a priming event
// for 2025-11-25 (with Handler.SSEReplies), a GET stream per session,
// DELETE.
//
// It is a dual-era server: besides initialize and the session eras it
// serves the stateless revision 2026-07-28 on both transports. It answers
// server/discover, and a request whose params._meta names a protocol
// version is answered on its own, without initialize (its tools/call and
// tools/list results carry "resultType":"complete"); over HTTP such a POST
// has no session and gets one JSON body. The replies of the session eras
// do not change by a byte.
//
// Besides echo it answers three test hooks, not listed in tools/list
// (hooks.go): big (a reply of megabytes), pretty (an indented reply) and
// progress (many notifications/progress before the reply, on stdio).
//
// [Options] change what an echo costs, for benchmarks: Scan answers echoes
// written as `mcpgate bench` writes them from a scan of their bytes (a
// megabyte message costs little more than its copy, so payload benchmarks
// measure the gateway, not this parser), and Burn makes every echo spend a
// given CPU time in a busy loop (a server bounded by its CPU).
//
// It lives in its own package, rather than in cmd/mcpecho, so that the tests
// of internal/loadgen can run the real fixture in an httptest server.
//
// Speed is the point: replies are built by appending bytes, the envelope is
// found with jsonrpc.Parse, and only requests have their params walked
// (with a pooled jsontext decoder, no reflection). The echoed message is copied as its raw JSON string
// token, never unescaped.
//
// Concurrency: [AppendReply] is pure and safe for concurrent use. In
// ServeStdio one goroutine (the caller's) reads and answers; when out is a
// non-blocking descriptor it writes each batch of replies itself with one
// write that takes what the pipe has room for, and one writer goroutine,
// owned and waited for by ServeStdio, writes what is left (and everything,
// for other writers), so reading never waits on a full stdout pipe. The Handler's session table
// is guarded by one mutex, never held during I/O.
package echoserver
