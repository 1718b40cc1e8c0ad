// Package modern holds the rules of the MCP 2026-07-28 revision ("modern",
// stateless) that the gateway needs to serve it in front of servers of the
// initialized (legacy, 2024-11-05 … 2025-11-25) eras: telling a modern POST
// from a legacy one ([IsModern]), checking a modern request against its
// headers ([Check]), translating a request for a legacy server ([ToLegacy])
// and its reply back ([FromLegacy]), answering server/discover for a legacy
// server ([Discover]), and spotting the server-to-client requests that the
// revision only allows through multi round-trip requests ([IsInputRequest]).
//
// The package is pure: no HTTP server, no I/O, no goroutines, no state.
// front calls IsModern and Check before it routes a POST; the code that
// talks to a legacy upstream calls ToLegacy, FromLegacy and Discover. It
// imports only internal/jsonrpc and the standard library.
//
// Ownership: like [jsonrpc.Message], what Check returns may alias the bytes
// the message was parsed from (see [Request]); the Append functions copy into
// dst and never modify their inputs. Every function is safe for concurrent
// use.
//
// Byte exactness: ToLegacy and FromLegacy splice into the original bytes
// instead of re-encoding, so ids, numbers, key order, escapes and whitespace
// outside the spliced members come out exactly as they went in.
//
// Errors: Check decides in one place what a refused client sees, as a
// [Problem] carrying both the HTTP status and the JSON-RPC error.
package eras

// Headers a modern client sends on every POST (streamable-http.mdx,
// "Request Metadata"). Names are case-insensitive; values are not.
const (
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	// HeaderName mirrors params.name (tools/call, prompts/get) or
	// params.uri (resources/read), possibly in the base64 sentinel form
	// (see [DecodeHeaderValue]).
	HeaderName = "Mcp-Name"
)
