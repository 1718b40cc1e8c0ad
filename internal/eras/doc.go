// Package eras holds the rules of the MCP 2026-07-28 revision ("modern",
// stateless) that the gateway needs to serve it in front of servers of the
// session eras (2024-11-05 … 2025-11-25): telling a modern POST from a
// session-era one ([IsModern]), checking a modern request against its
// headers ([Check]), translating a request for a session-era server
// ([ToSessionEra]) and its reply back ([FromSessionEra]), answering
// server/discover for a session-era server ([Discover]), and spotting the server-to-client requests that the
// revision only allows through multi round-trip requests ([IsInputRequest]).
//
// The package is pure: no HTTP server, no I/O, no goroutines, no state.
// front calls IsModern and Check before it routes a POST; the code that
// talks to a session-era upstream calls ToSessionEra, FromSessionEra and
// Discover. It imports only internal/jsonrpc, internal/protocol (where the
// versions, codes, _meta keys and method tables it applies are named) and
// the standard library.
//
// Ownership: like [jsonrpc.Message], what Check returns may alias the bytes
// the message was parsed from (see [Request]); the Append functions copy into
// dst and never modify their inputs. Every function is safe for concurrent
// use.
//
// Byte exactness: ToSessionEra and FromSessionEra splice into the original bytes
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
