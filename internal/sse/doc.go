// Package sse owns the Server-Sent Events wire format (WHATWG HTML,
// "Server-sent events", section 9.2): writing events and comments, and
// reading an event stream back into events.
//
// The HTTP front uses the writer for Streamable HTTP and legacy SSE
// responses; the remote upstream client uses the Reader. The package knows
// nothing of HTTP (callers set headers and flush), JSON-RPC or sessions.
//
// Writing is stateless and safe for concurrent use, but events written
// concurrently to one io.Writer interleave unless the caller serialises
// them: each event goes out in a single Write call. A Reader is owned by one
// goroutine.
package sse
