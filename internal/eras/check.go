package eras

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Request is what [Check] reads from an accepted modern message; when Check
// refuses the message it is incomplete and only good for logs.
//
// Capabilities aliases msg.Raw, as the message itself does; the strings
// do not (they are constants for the usual values, copies otherwise).
type Request struct {
	Method string
	// Version is params._meta[protocol.MetaProtocolVersion]. For a notification,
	// whose _meta is optional, it is "" when the key is absent or not a
	// string.
	Version string
	// Capabilities is the raw JSON object params._meta[protocol.MetaClientCapabilities]
	// (nil for a notification without it).
	Capabilities []byte
	// LogLevel is params._meta[protocol.MetaLogLevel], "" when absent: then no
	// notifications/message may be sent for the request.
	LogLevel string
	// OlderHeader is the MCP-Protocol-Version header of a request that
	// named an initialized-era version there and a modern one in its body:
	// accepted, served as the body's (see [Check]); "" otherwise.
	OlderHeader string
	// RepeatedHeader is true when MCP-Protocol-Version came more than once
	// with the same value (accepted, see [HeaderVersion]).
	RepeatedHeader bool
}

// Problem is a refused modern message: the HTTP status to answer with and
// the JSON-RPC error to put in the body. Status and Code are decided here so
// that every caller answers the same way (streamable-http.mdx, basic/index.mdx).
type Problem struct {
	Status  int
	Code    int
	Message string
	Data    []byte // raw JSON for error.data, nil for none
}

// Error returns the message with the status and code, for logs.
func (p *Problem) Error() string {
	return fmt.Sprintf("modern: %s (HTTP %d, JSON-RPC %d)", p.Message, p.Status, p.Code)
}

// AppendResponse appends to dst the JSON-RPC error response carrying p for
// the request whose raw id is id (nil for a notification: id is then null).
// Every error must carry the request's id (conformance
// sep-2575-http-server-error-jsonrpc-id).
func (p *Problem) AppendResponse(dst, id []byte) []byte {
	dst = jsonrpc.AppendErrorResponse(dst, id, p.Code, p.Message)
	if p.Data == nil {
		return dst
	}
	dst = append(dst[:len(dst)-len(`}}`)], `,"data":`...)
	dst = append(dst, p.Data...)
	return append(dst, `}}`...)
}

// logLevels are the LoggingLevel values (schema.ts), least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// Check validates a modern message (one [IsModern] accepted; msg as
// [jsonrpc.Parse] returned it) against its headers and returns what it
// carries, or the Problem to answer with (nil when accepted). The
// checks run in the order of streamable-http.mdx and the Go SDK, so a
// message with several faults gets the error the conformance suite expects:
//
//  1. a response: clients never send one in 2026-07-28 (400, -32600);
//  2. MCP-Protocol-Version missing (400, -32020);
//  3. params._meta missing or not an object, protocol.MetaProtocolVersion not a
//     string, protocol.MetaClientCapabilities not an object (400, -32602);
//  4. MCP-Protocol-Version differs from protocol.MetaProtocolVersion (400, -32020);
//  5. Mcp-Method missing or not the method (400, -32020);
//  6. for tools/call and prompts/get (params.name) and resources/read
//     (params.uri): Mcp-Name missing, not valid sentinel base64, or not the
//     body value once decoded (400, -32020); the body value missing or not
//     a string (400, -32602);
//  7. a version not in [protocol.StatelessVersions] (400, -32022, data {supported, requested});
//  8. a method removed in 2026-07-28, tasks/* included (404, -32601);
//  9. protocol.MetaLogLevel present but not a LoggingLevel (400, -32602).
//
// A header given more than once counts as a mismatch: which copy an
// intermediary routed on cannot be known. MCP-Protocol-Version is read
// with [HeaderVersion]: the same value repeated is that value. Mcp-Param-*
// headers need the tool's inputSchema and are left to the caller.
//
// Where real clients' intent is unambiguous, Check accepts what they send
// (the result records it): a body naming a modern version under a header
// naming an initialized-era one (claude.ai's connectors relay 2026-07-28
// requests under "2025-11-25") is served as the body's version; the
// transport that set such a header sends no Mcp-Method or Mcp-Name, so
// those are checked only when present. A header naming an unknown or
// another modern version is still a mismatch (step 4).
//
// Notifications: 2026-07-28 defines none from client to server over HTTP
// (notifications/cancelled is stdio-only; closing the stream cancels) and no
// header rules for them. Check refuses only removed ones (404, -32601, to be
// sent with a null id) and accepts the rest with whatever _meta they carry,
// without checking headers: the caller answers 202 Accepted and drops them.
func Check(h http.Header, msg *jsonrpc.Message) (Request, *Problem) {
	switch msg.Kind {
	case jsonrpc.KindResponse:
		return Request{}, &Problem{http.StatusBadRequest, protocol.CodeInvalidRequest,
			"Invalid Request: clients do not send responses in protocol version " + protocol.StatelessVersion, nil}
	case jsonrpc.KindNotification:
		return checkNotification(msg)
	}
	b := msg.Raw
	method := msg.MethodName() // valid while msg.Raw is; cloned below if kept
	req := Request{Method: knownMethod(method)}

	header, repeated, ok := HeaderVersion(h)
	switch {
	case !ok:
		return req, &Problem{http.StatusBadRequest, protocol.CodeHeaderMismatch,
			fmt.Sprintf("Header mismatch: %s header given with different values", HeaderProtocolVersion), nil}
	case header == "":
		return req, &Problem{http.StatusBadRequest, protocol.CodeHeaderMismatch,
			fmt.Sprintf("Header mismatch: missing required %s header", HeaderProtocolVersion), nil}
	}
	req.RepeatedHeader = repeated
	meta := msg.Meta // located by Parse: no walk of the message here
	if !isObject(b, meta) {
		return req, invalidParams("params._meta is required and must be an object")
	}
	var version, caps, level jsonrpc.Span
	w := objectAt(b, meta)
	for m, ok := w.next(); ok; m, ok = w.next() {
		switch {
		case keyIs(b, m, protocol.MetaProtocolVersion):
			version = m.val
		case keyIs(b, m, protocol.MetaClientCapabilities):
			caps = m.val
		case keyIs(b, m, protocol.MetaLogLevel):
			level = m.val
		}
	}
	v, ok := textAt(b, version)
	if !ok {
		return req, invalidParams(fmt.Sprintf("_meta field %q is required and must be a string", protocol.MetaProtocolVersion))
	}
	if !isObject(b, caps) {
		return req, invalidParams(fmt.Sprintf("_meta field %q is required and must be an object", protocol.MetaClientCapabilities))
	}
	if string(v) != header {
		if !olderHeader(header, string(v)) {
			return req, mismatch(HeaderProtocolVersion, header, string(v))
		}
		req.OlderHeader = header
	}
	// Without allocating: v aliases msg.Raw, header is the caller's.
	switch {
	case string(v) == protocol.StatelessVersion:
		req.Version = protocol.StatelessVersion
	case string(v) == header:
		req.Version = header
	default:
		req.Version = string(v)
	}
	req.Capabilities = b[caps.Start:caps.End:caps.End]

	// Mcp-Method and Mcp-Name are the revision's; a session-era transport
	// (an older header) has none, but one it does send must agree.
	optional := req.OlderHeader != ""
	if !optional || len(h.Values(HeaderMethod)) > 0 {
		hm, p := single(h, HeaderMethod)
		if p != nil {
			return req, p
		}
		if hm != method {
			return req, mismatch(HeaderMethod, hm, method)
		}
	}
	if !optional || len(h.Values(HeaderName)) > 0 {
		if p := checkName(h, b, msg.Params, method); p != nil {
			return req, p
		}
	}

	if !protocol.IsStatelessVersion(req.Version) {
		data, _ := json.Marshal(struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		}{protocol.StatelessVersions, req.Version})
		return req, &Problem{http.StatusBadRequest, protocol.CodeUnsupportedVersion, "Unsupported protocol version", data}
	}
	if protocol.RemovedInStateless(method) {
		return req, methodNotFound(method)
	}
	if level.Present() {
		l, _ := textAt(b, level)
		i := slices.Index(logLevels, string(l))
		if i < 0 {
			return req, invalidParams(fmt.Sprintf("_meta field %q must be one of %s", protocol.MetaLogLevel, strings.Join(logLevels, ", ")))
		}
		req.LogLevel = logLevels[i]
	}
	if req.Method == "" {
		req.Method = strings.Clone(method)
	}
	return req, nil
}

// checkNotification applies the notification rules of [Check].
func checkNotification(msg *jsonrpc.Message) (Request, *Problem) {
	method := msg.MethodName()
	if protocol.RemovedInStateless(method) {
		return Request{}, methodNotFound(method)
	}
	b := msg.Raw
	req := Request{Method: knownMethod(method)}
	if req.Method == "" {
		req.Method = strings.Clone(method)
	}
	meta := msg.Meta
	if v, ok := textAt(b, find(b, meta, protocol.MetaProtocolVersion)); ok {
		req.Version = string(v)
	}
	if caps := find(b, meta, protocol.MetaClientCapabilities); isObject(b, caps) {
		req.Capabilities = b[caps.Start:caps.End:caps.End]
	}
	if l, ok := textAt(b, find(b, meta, protocol.MetaLogLevel)); ok {
		if i := slices.Index(logLevels, string(l)); i >= 0 {
			req.LogLevel = logLevels[i]
		}
	}
	return req, nil
}

// checkName applies the Mcp-Name rule (step 6 of [Check]).
func checkName(h http.Header, b []byte, params jsonrpc.Span, method string) *Problem {
	field := "name"
	switch method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet:
	case protocol.MethodResourcesRead:
		field = "uri"
	default:
		return nil
	}
	hn, p := single(h, HeaderName)
	if p != nil {
		return p
	}
	decoded, err := DecodeHeaderValue(hn)
	if err != nil {
		return &Problem{http.StatusBadRequest, protocol.CodeHeaderMismatch,
			fmt.Sprintf("Header mismatch: %s header value '%s' is not valid =?base64?...?= encoding", HeaderName, clip(hn)), nil}
	}
	body, ok := textAt(b, find(b, params, field))
	if !ok {
		return invalidParams(fmt.Sprintf("params.%s is required for %s and must be a string", field, method))
	}
	if string(body) != decoded {
		return mismatch(HeaderName, hn, string(body))
	}
	return nil
}

// single returns the one value of header name, or the Problem for a header
// that is missing (or empty) or repeated.
func single(h http.Header, name string) (string, *Problem) {
	key := name
	if name == HeaderProtocolVersion {
		key = "Mcp-Protocol-Version" // canonical already: h.Values would allocate to canonicalize
	}
	vs := h.Values(key)
	switch {
	case len(vs) > 1:
		return "", &Problem{http.StatusBadRequest, protocol.CodeHeaderMismatch,
			fmt.Sprintf("Header mismatch: %s header given %d times", name, len(vs)), nil}
	case len(vs) == 0 || vs[0] == "":
		return "", &Problem{http.StatusBadRequest, protocol.CodeHeaderMismatch,
			fmt.Sprintf("Header mismatch: missing required %s header", name), nil}
	}
	return vs[0], nil
}

// mismatch is the -32020 error in the words of the spec's example.
func mismatch(name, header, body string) *Problem {
	return &Problem{http.StatusBadRequest, protocol.CodeHeaderMismatch,
		fmt.Sprintf("Header mismatch: %s header value '%s' does not match body value '%s'", name, clip(header), clip(body)), nil}
}

func invalidParams(msg string) *Problem {
	return &Problem{http.StatusBadRequest, protocol.CodeInvalidParams, "Invalid params: " + msg, nil}
}

func methodNotFound(method string) *Problem {
	return &Problem{http.StatusNotFound, protocol.CodeMethodNotFound,
		fmt.Sprintf("Method not found: %s is not part of protocol version %s", strconv.Quote(clip(method)), protocol.StatelessVersion), nil}
}

// clip shortens a client-chosen value echoed in an error message.
func clip(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// knownMethod returns method as a constant when it is one of the modern
// methods (so Request does not alias msg.Raw), or "".
func knownMethod(method string) string {
	for _, m := range [...]string{protocol.MethodToolsCall, protocol.MethodToolsList, protocol.MethodResourcesRead, protocol.MethodResourcesList,
		protocol.MethodResourcesTemplateList, protocol.MethodPromptsGet, protocol.MethodPromptsList, protocol.MethodCompletionComplete,
		protocol.MethodServerDiscover, protocol.MethodSubscriptionsListen, protocol.NotificationCancelled} {
		if m == method {
			return m
		}
	}
	return ""
}
