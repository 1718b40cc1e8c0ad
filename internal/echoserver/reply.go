package echoserver

import (
	"bytes"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Versions are the protocol versions the fixture negotiates in initialize
// (the session eras), newest first.
var Versions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// LatestVersion is answered to an initialize asking for a version not in
// Versions.
const LatestVersion = "2025-11-25"

// StatelessVersion is the protocol revision the fixture also serves without
// initialize or session: a request whose params._meta names it (under
// KeyProtocolVersion) is answered on its own, as the revision's stateless
// requests are. The fixture is a dual-era server: it answers initialize
// and server/discover alike, and tells the eras apart per request.
const StatelessVersion = "2026-07-28"

// KeyProtocolVersion is the params._meta key of a stateless request that
// names its protocol version. The fixture spells the revision's names out
// itself, rather than sharing the gateway's internal/eras, so that a
// wrong name on one side shows as a failure instead of agreeing with
// itself.
const KeyProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// Error codes of the stateless revision the fixture answers with.
const (
	CodeHeaderMismatch     = -32020
	CodeUnsupportedVersion = -32022
)

// JSON-RPC 2.0's error codes, written here rather than shared with the
// gateway for the same reason as the names above.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// ToolName is the fixture's one tool.
const ToolName = "echo"

const (
	serverInfoObject = `{"name":"mcpecho","version":"1.0.0"}`
	serverInfo       = `"serverInfo":` + serverInfoObject
	tools            = `"tools":[{"name":"echo","description":"Returns its message argument as text.",` +
		`"inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}]`
	toolsList = `{` + tools + `}`
	// complete is the first member of every result to a stateless request
	// (2026-07-28 requires resultType in every result).
	complete = `"resultType":"complete"`
	// toolsListStateless is tools/list's result for a stateless request: a
	// list result carries its caching hints there.
	toolsListStateless = `{` + complete + `,` + tools + `,"ttlMs":0,"cacheScope":"public"}`
	// discoverResult answers server/discover: every version the fixture
	// serves (2024-11-05 is left out: it is the HTTP+SSE era, which the
	// fixture's HTTP transport does not serve), and its identity in _meta,
	// where 2026-07-28 puts it.
	discoverResult = `{` + complete + `,"supportedVersions":["` + StatelessVersion + `","2025-11-25","2025-06-18","2025-03-26"],` +
		`"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public",` +
		`"_meta":{"io.modelcontextprotocol/serverInfo":` + serverInfoObject + `}}`
)

// Negotiate returns requested if the fixture supports it, else LatestVersion.
func Negotiate(requested string) string {
	for _, v := range Versions {
		if v == requested {
			return v
		}
	}
	return LatestVersion
}

// AppendReply appends the reply to one JSON-RPC message to dst. replied is
// false for notifications and responses, which get none. version is, for a
// successful initialize, the negotiated protocol version; for a stateless
// request (one whose params._meta carries KeyProtocolVersion), that
// version; "" otherwise. Malformed messages get a JSON-RPC error with a
// null id.
//
// A stateless request is answered without initialize: tools/call and
// tools/list results start with "resultType":"complete", a version other
// than StatelessVersion gets error CodeUnsupportedVersion, and ping (which
// the revision removed) "method not found". Requests without that _meta key
// get the replies of the session eras, unchanged. server/discover is
// answered in either case.
func AppendReply(dst, msg []byte) (out []byte, version string, replied bool) {
	return appendReply(dst, msg, false, nil)
}

// appendReply is AppendReply; with lines (stdio, where a message is a
// line) it also appends the notifications a request sends before its
// reply, each with its newline (hooks.go). An echo spends o's Burn (o may
// be nil: no options).
func appendReply(dst, msg []byte, lines bool, o *Options) (out []byte, version string, replied bool) {
	m, err := jsonrpc.Parse(msg)
	if err != nil {
		return jsonrpc.AppendErrorResponse(dst, nil, jsonrpc.Code(err), err.Error()), "", true
	}
	if m.Kind != jsonrpc.KindRequest {
		return dst, "", false
	}
	id := m.Bytes(m.ID)
	method := m.MethodName()
	p, err := walkParams(msg)
	if err != nil {
		return jsonrpc.AppendErrorResponse(dst, id, codeParseError, err.Error()), "", true
	}
	stateless := p.metaVersion != nil && method != "initialize"
	if stateless {
		version = StatelessVersion
		if string(p.metaVersion) != StatelessVersion {
			version = string(p.metaVersion)
			return appendUnsupported(dst, id, p.metaVersion), version, true
		}
	}
	switch method {
	case "tools/call":
		switch {
		case string(p.name) != ToolName && !stateless && isHook(p.name):
			return appendHook(dst, id, &p, lines), "", true // hooks.go
		case string(p.name) != ToolName:
			return jsonrpc.AppendErrorResponse(dst, id, codeInvalidParams, "unknown tool "+string(p.name)), version, true
		case p.message == nil:
			return jsonrpc.AppendErrorResponse(dst, id, codeInvalidParams, "arguments.message must be a string"), version, true
		}
		o.spend()
		dst = append(dst, `{"jsonrpc":"2.0","id":`...)
		dst = append(dst, id...)
		if stateless {
			dst = append(dst, `,"result":{`+complete+`,"content":[{"type":"text","text":`...)
		} else {
			dst = append(dst, `,"result":{"content":[{"type":"text","text":`...)
		}
		dst = append(dst, p.message...)
		return append(dst, `}]}}`...), version, true
	case "initialize":
		v := Negotiate(string(p.version))
		dst = append(dst, `{"jsonrpc":"2.0","id":`...)
		dst = append(dst, id...)
		dst = append(dst, `,"result":{"protocolVersion":"`...)
		dst = append(dst, v...)
		dst = append(dst, `","capabilities":{"tools":{}},`...)
		dst = append(dst, serverInfo...)
		return append(dst, `}}`...), v, true
	case "server/discover":
		return jsonrpc.AppendResponse(dst, id, []byte(discoverResult)), version, true
	case "ping":
		if !stateless { // 2026-07-28 has no ping
			return jsonrpc.AppendResponse(dst, id, nil), "", true
		}
	case "tools/list":
		if stateless {
			return jsonrpc.AppendResponse(dst, id, []byte(toolsListStateless)), version, true
		}
		return jsonrpc.AppendResponse(dst, id, []byte(toolsList)), "", true
	}
	return jsonrpc.AppendErrorResponse(dst, id, codeMethodNotFound, "method not found"), version, true
}

// appendUnsupported appends the error for a stateless request of a version
// the fixture does not serve; requested is the version's string content as
// the request wrote it.
func appendUnsupported(dst, id, requested []byte) []byte {
	dst = jsonrpc.AppendErrorResponse(dst, id, CodeUnsupportedVersion, "Unsupported protocol version")
	dst = append(dst[:len(dst)-len(`}}`)], `,"data":{"supported":["`+StatelessVersion+`"],"requested":"`...)
	dst = append(dst, requested...)
	return append(dst, `"}}}`...)
}

// params is what the fixture reads from a request's params. Each field
// aliases the message: name, version and metaVersion are string contents
// as written (escapes are not decoded: the values the fixture compares are
// plain ASCII), message is the raw JSON string token of arguments.message.
type params struct {
	name        []byte
	version     []byte // protocolVersion (initialize)
	metaVersion []byte // _meta[KeyProtocolVersion] (a stateless request); nil if absent
	message     []byte
	// The test hooks' (hooks.go): raw tokens as written, nil if absent.
	progressToken []byte // _meta.progressToken
	bytes, count  []byte // arguments.bytes, arguments.count (numbers)
}

// walker is a pooled jsontext decoder reading a message in place.
type walker struct {
	buf bytes.Buffer
	dec jsontext.Decoder
	raw []byte
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

// walkParams finds params.name, params.protocolVersion,
// params._meta[KeyProtocolVersion] and params.arguments.message in msg,
// which jsonrpc.Parse has validated.
func walkParams(msg []byte) (params, error) {
	w := walkers.Get().(*walker)
	w.raw = msg
	w.buf = *bytes.NewBuffer(msg)
	w.dec.Reset(&w.buf)
	var p params
	err := w.object(func(name []byte) error {
		if string(name) != "params" || w.dec.PeekKind() != '{' {
			return w.skip()
		}
		return w.object(func(name []byte) error {
			switch string(name) {
			case "name":
				p.name = w.str()
			case "protocolVersion":
				p.version = w.str()
			case "_meta":
				if w.dec.PeekKind() != '{' {
					return w.skip()
				}
				return w.object(func(name []byte) error {
					switch string(name) {
					case KeyProtocolVersion:
						p.metaVersion = w.str()
					case "progressToken":
						p.progressToken = w.token()
					default:
						return w.skip()
					}
					return nil
				})
			case "arguments":
				if w.dec.PeekKind() != '{' {
					return w.skip()
				}
				return w.object(func(name []byte) error {
					switch kind := w.dec.PeekKind(); {
					case string(name) == "message" && kind == '"':
						p.message = w.token()
					case string(name) == "bytes" && kind == '0':
						p.bytes = w.token()
					case string(name) == "count" && kind == '0':
						p.count = w.token()
					default:
						return w.skip()
					}
					return nil
				})
			default:
				return w.skip()
			}
			return nil
		})
	})
	w.raw, w.buf = nil, bytes.Buffer{}
	w.dec.Reset(&w.buf)
	walkers.Put(w)
	return p, err
}

// object reads an object, calling member for each name with the decoder
// positioned at its value; member must consume the value.
func (w *walker) object(member func(name []byte) error) error {
	if _, err := w.dec.ReadToken(); err != nil {
		return err
	}
	for w.dec.PeekKind() != '}' {
		v, err := w.dec.ReadValue()
		if err != nil {
			return err
		}
		name := v[1 : len(v)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			name, _ = jsontext.AppendUnquote(nil, v)
		}
		if err := member(name); err != nil {
			return err
		}
	}
	_, err := w.dec.ReadToken()
	return err
}

func (w *walker) skip() error {
	_, err := w.dec.ReadValue()
	return err
}

// token reads the next value and returns it as it appears in the message.
func (w *walker) token() []byte {
	v, err := w.dec.ReadValue()
	if err != nil {
		return nil
	}
	end := int(w.dec.InputOffset())
	return w.raw[end-len(v) : end : end]
}

// str returns the content of the next value if it is a string, else nil.
func (w *walker) str() []byte {
	if w.dec.PeekKind() != '"' {
		_ = w.skip()
		return nil
	}
	t := w.token()
	if len(t) < 2 {
		return nil
	}
	return t[1 : len(t)-1]
}
