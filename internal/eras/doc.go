// Package eras is everything the gateway does between the protocol's
// eras: the session eras (2024-11-05 … 2025-11-25, initialized, over
// Streamable HTTP or HTTP+SSE) and the stateless revision 2026-07-28 (no
// session, server/discover, Mcp-* headers, multi round-trip requests). A
// client of either era may reach a server of either; this package adapts
// at that boundary, and nothing else in the gateway knows the rules.
//
// What it owns, by file:
//
//   - Rules (pure, no I/O): telling a stateless POST from a session one
//     (detect.go: [IsModern]), checking a stateless request against its
//     headers (check.go, header.go, params.go: [Check]), translating a
//     request for a session-era server and its reply back (translate.go:
//     [ToSessionEra], [FromSessionEra]), server/discover from an initialize result
//     (discover.go: [Discover]), and the reverse: an initialize result from
//     server/discover and a session's request as a stateless one
//     (reverse.go).
//   - Forward translation, a stateless client on a session-era server
//     (serve.go: [Parking.Route], [Parking.Serve], [DiscoverResult],
//     [Upstream]), with the input-required bridge: a server's requests to
//     its client answered input_required and the request parked until the
//     retry (mrtr.go: [Exchange]; parking.go: [Parking], the requestState),
//     and the client capabilities a translation process declares
//     (capabilities.go: [CapSet]).
//   - Passthrough state: a 2026-07-28 server's requestState sealed for the
//     principal it was given to (passstate.go).
//   - The reverse bridge, a session-era client on a 2026-07-28 server
//     (reverse_conn.go, reverse_call.go, reverse_listen.go: [NewReverse]),
//     and its sessions handed to another replica (reverse_resume.go:
//     [NewReverseHandoff], [ResumeReverse]).
//   - subscriptions/listen, once (listen.go: [Filter], [Listener],
//     [AckMessage], [Tag], [SubscriptionSpan]; listen_translated.go:
//     [OpenListen] for a session-era server).
//
// Who calls it: the HTTP front (internal/front) checks and routes
// stateless POSTs and writes what an Exchange or a TranslatedListen puts
// on its streams; internal/servers opens the reverse bridge; internal/mux
// serves its stateless process's listens with Filter and Listener;
// internal/upstream/remote and internal/bridge use the rules. It imports
// internal/conn, internal/jsonrpc, internal/protocol (the versions, codes,
// _meta keys and method tables it applies) and internal/seal (the key
// ring that seals requestStates) only: not the mux, which imports it.
//
// Locking: the rules hold no state and are safe for concurrent use. A
// Parking's table lock is taken after an Exchange's own lock, never
// before. Streams never block, so a Listener and a reverse call may hold
// their own lock while they deliver (to order what a client gets); an
// Exchange delivers after releasing its lock. A
// reverse session's goroutines (one per request in flight, one for its
// listen) end with the session (Close) or their request.
//
// Ownership: like [jsonrpc.Message], what Check returns may alias the bytes
// the message was parsed from (see [Request]); the Append functions copy into
// dst and never modify their inputs.
//
// Byte exactness: ToSessionEra and FromSessionEra splice into the original bytes
// instead of re-encoding, so ids, numbers, key order, escapes and whitespace
// outside the spliced members come out exactly as they went in.
//
// Errors: Check decides in one place what a refused client sees, as a
// [Problem] carrying both the HTTP status and the JSON-RPC error; so do the
// refusals of Serve, Unpark, Resume, OpenListen and DiscoverResult.
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
