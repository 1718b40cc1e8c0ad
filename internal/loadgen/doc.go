// Package loadgen is the load generator behind `mcpgate bench`: it drives
// MCP sessions over Streamable HTTP and checks every reply.
//
// [Run] opens N sessions (initialize, notifications/initialized, a first
// tools/call; each open is timed up to that call's reply), then has C
// callers per session send tools/call echo with a message unique to the
// call, for a warmup and then a measured duration. A message starts with
// its unique part and may be padded with ASCII filler to a given size, so
// that payload throughput can be measured. Each reply, JSON body or SSE
// stream (priming and other non-reply events skipped), must carry the
// caller's own id and echo its own message exactly: a well-formed result
// whose id or unique part belongs to another call is counted as crossed (a
// reply delivered to the wrong caller), every other failure, a damaged
// echo included, as an error. Latencies go into per-caller log-linear
// histograms, merged once at the end.
//
// With a version of the stateless revision (2026-07-28, see [Stateless])
// there is no initialize and no session: each of the N "sessions" is a
// client opened by one server/discover (whose result must list the
// version), and every call is a stateless tools/call carrying the
// revision's params._meta and its MCP-Protocol-Version, Mcp-Method and
// Mcp-Name headers; its result must also be "resultType":"complete".
//
// [Idle] opens many sessions, some holding a GET stream, holds them, then
// deletes them: what a gateway's memory per session is measured with. It
// needs a session era's version.
//
// The servers it is tested against are internal/echoserver (the same
// fixture cmd/mcpecho serves) and in-test handlers that misbehave.
//
// Concurrency and ownership: Run and Idle own every goroutine they start
// (callers, openers, the progress reporter) and wait for all of them before
// returning. A caller goroutine alone writes its histogram and first error;
// its counters are atomics so the progress reporter can read them while it
// runs. Nothing on the hot path takes a lock shared between callers.
package loadgen
