// Package jsonrpc owns the JSON-RPC 2.0 envelope as the gateway sees it:
// it finds the few values routing needs (id, method, params._meta.progressToken
// and, for notifications/cancelled, params.requestId) in one validating pass,
// splices replacements into the original bytes without re-encoding, splits
// batches, and builds the handful of messages the gateway writes itself
// (error replies, responses, requests, notifications).
//
// It knows nothing of MCP semantics beyond those key names, nor of HTTP,
// processes or sessions. Callers are httpapi, mux, upstream and session.
//
// Ownership: a [Message] aliases the bytes given to [Parse]; nothing is
// copied, so the caller must not modify those bytes while the Message (or a
// string returned by [Message.MethodName]) is in use. Every function is safe
// for concurrent use; Parse reuses decoders through a sync.Pool so that a
// typical request is parsed without allocating.
//
// Errors: every error from Parse and SplitBatch wraps exactly one of
// [ErrParse] (the bytes are not valid JSON: the client gets
// [CodeParseError]) or [ErrInvalidRequest] (valid JSON that is not a valid
// JSON-RPC 2.0 message: [CodeInvalidRequest]); [Code] makes that decision in
// one place.
package jsonrpc
