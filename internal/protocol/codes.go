package protocol

// The JSON-RPC error codes the gateway sends. What a client sees for a
// given failure is decided where the error is written; these only name
// the numbers.
const (
	// JSON-RPC 2.0's own codes.
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeServerError reports that the upstream server is unavailable,
	// has exited or is overloaded (gateway-defined, in the range JSON-RPC
	// reserves for implementations).
	CodeServerError = -32000
	// CodeRequestTimeout reports that the request timed out
	// (gateway-defined).
	CodeRequestTimeout = -32001
	// CodeResourceNotFound is the session eras' "resource not found" of
	// resources/read; 2026-07-28 answers -32602 ([CodeInvalidParams])
	// instead.
	CodeResourceNotFound = -32002

	// The codes 2026-07-28 defines (renumbered late: drafts and old SDKs
	// used -32001, -32003 and -32004).

	// CodeHeaderMismatch: the request's headers and body disagree, or a
	// required header is missing.
	CodeHeaderMismatch = -32020
	// CodeMissingCapability: the request needs a client capability its
	// _meta does not declare.
	CodeMissingCapability = -32021
	// CodeUnsupportedVersion: the request's protocol version is not one
	// the server serves; its data lists "supported" and "requested".
	CodeUnsupportedVersion = -32022
)
