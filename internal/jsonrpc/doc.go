// Package jsonrpc owns the JSON-RPC 2.0 envelope as the gateway sees it:
// it finds the few values routing needs (id, method, params._meta.progressToken
// and, for notifications/cancelled, params.requestId) in one validating pass,
// splices replacements into the original bytes without re-encoding, splits
// batches, and builds the handful of messages the gateway writes itself
// (error replies, responses, requests, notifications).
//
// It knows nothing of MCP semantics beyond those key names, nor of HTTP,
// processes or sessions. Its one internal import is internal/protocol, for
// the names of those keys and of the error codes its errors map to. Every
// package that reads or writes messages calls it: the front and admission
// (the envelope of a POST), conn and eras, the mux (ids and tokens
// rewritten in place), servers and aggregate, the upstreams (stdio's
// writer compacts lines; remote reads replies), and audit and limits (which
// requests a POST holds).
//
// Ownership: a [Message] aliases the bytes given to [Parse]; nothing is
// copied, so the caller must not modify those bytes while the Message (or a
// string returned by [Message.MethodName]) is in use. Every function is safe
// for concurrent use. Parse keeps its state on the stack: it allocates only
// to report an error, for an object it reads that has more than 16 keys, and
// for nesting deeper than 256 levels.
//
// Validation: Parse and SplitBatch check the whole input as JSON (syntax,
// number grammar, UTF-8 everywhere, no unescaped control characters, valid
// escapes with no lone surrogates, nesting up to 10000 levels, nothing after
// the value but whitespace), so that a peer never receives broken JSON.
// Duplicate keys are rejected only in the objects Parse reads: the message
// itself, params and params._meta. Inside values it passes through
// (params.arguments, result, error.data and any other member) duplicates are
// left to the receiver, as a forwarding proxy should leave them.
//
// Errors: every error from Parse and SplitBatch wraps exactly one of
// [ErrParse] (the bytes are not valid JSON: the client gets
// [protocol.CodeParseError]) or [ErrInvalidRequest] (valid JSON that is
// not a valid JSON-RPC 2.0 message: [protocol.CodeInvalidRequest]); [Code]
// makes that decision in one place.
package jsonrpc
