// Package protocol names, once, the facts of the Model Context Protocol that
// the gateway depends on: its versions and the eras they belong to
// (versions.go), the JSON-RPC and MCP error codes the gateway sends
// (codes.go), the _meta keys it reads and writes (meta.go), and the method
// names with the tables of which method is what (methods.go).
//
// Three eras, named for what they are:
//   - the HTTP+SSE transport of 2024-11-05 ("legacy" in this code means
//     that transport and nothing else);
//   - the session eras, 2024-11-05 to 2025-11-25: a client initializes a
//     session before anything else (Streamable HTTP from 2025-03-26);
//   - the stateless revision, 2026-07-28: no initialize, no session,
//     every request carries its version in params._meta.
//
// Everyone may import it: the HTTP front, the multiplexer, the upstreams,
// the era adaptation, metrics, config, even jsonrpc (for the codes its own
// errors map to). It imports no internal package, holds no state and
// starts no goroutine; its functions are safe for concurrent use. The
// slices it exports are shared: callers must not modify them.
//
// The independent test peers (internal/echoserver, internal/loadgen) keep
// their own copies on purpose, so that a wrong constant here is caught by a
// peer that does not share it.
package protocol
