package eras

import (
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// IsModern reports whether a POST that carries no Mcp-Session-Id is to be
// served under 2026-07-28 (the caller sends session traffic down the
// session path without asking). headerVersion is its MCP-Protocol-Version header,
// "" if absent; msg is its parsed body, or nil when there is none to look at
// (a batch, a body that did not parse), and then the header alone decides.
//
// The rule (versioning.mdx: "a request carrying modern per-request _meta is
// served statelessly …; an initialize request selects legacy semantics",
// legacy meaning the session eras there):
//   - params._meta[protocol.MetaProtocolVersion] present, whatever its value: modern;
//   - else initialize: a session, whatever the header (a session-era client may
//     send any header on initialize; modern clients never send initialize
//     without the _meta key);
//   - else a header that is set and not one of [protocol.SessionVersions]: modern,
//     so an unknown future version gets a modern error (-32022), not a
//     session-era one;
//   - else (no header: 2025-03-26 clients may omit it; a session-era
//     version): a session.
//
// So a modern client's initialize or ping reaches [Check] and gets 404,
// which is what the conformance suite expects.
func IsModern(headerVersion string, msg *jsonrpc.Message) bool {
	if msg != nil {
		if hasMetaVersion(msg) {
			return true
		}
		if msg.MethodIs(protocol.MethodInitialize) {
			return false
		}
	}
	return headerVersion != "" && !protocol.IsSessionVersion(headerVersion)
}

// hasMetaVersion reports whether msg has params._meta[protocol.MetaProtocolVersion].
func hasMetaVersion(msg *jsonrpc.Message) bool {
	return find(msg.Raw, msg.Meta, protocol.MetaProtocolVersion).Present()
}

// IsInputRequest reports whether msg, sent by a server, is one of the
// requests that 2026-07-28 allows only inside an input_required result
// (MRTR: sampling/createMessage, elicitation/create, roots/list). A session-era
// server sends them as JSON-RPC requests; a modern client must get them as
// inputRequests instead.
func IsInputRequest(msg *jsonrpc.Message) bool {
	if msg.Kind != jsonrpc.KindRequest {
		return false
	}
	return protocol.IsServerRequest(msg.MethodName())
}
