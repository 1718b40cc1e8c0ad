package echoserver

import (
	"bytes"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Versions are the protocol versions the fixture negotiates, newest first.
var Versions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// LatestVersion is answered to an initialize asking for a version not in
// Versions.
const LatestVersion = "2025-11-25"

// ToolName is the fixture's one tool.
const ToolName = "echo"

const (
	serverInfo = `"serverInfo":{"name":"mcpecho","version":"1.0.0"}`
	toolsList  = `{"tools":[{"name":"echo","description":"Returns its message argument as text.",` +
		`"inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}]}`
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
// false for notifications and responses, which get none. For a successful
// initialize, version is the negotiated protocol version ("" otherwise).
// Malformed messages get a JSON-RPC error with a null id.
func AppendReply(dst, msg []byte) (out []byte, version string, replied bool) {
	m, err := jsonrpc.Parse(msg)
	if err != nil {
		return jsonrpc.AppendErrorResponse(dst, nil, jsonrpc.Code(err), err.Error()), "", true
	}
	if m.Kind != jsonrpc.KindRequest {
		return dst, "", false
	}
	id := m.Bytes(m.ID)
	switch m.MethodName() {
	case "tools/call":
		p, err := walkParams(msg)
		switch {
		case err != nil:
			return jsonrpc.AppendErrorResponse(dst, id, jsonrpc.CodeParseError, err.Error()), "", true
		case string(p.name) != ToolName:
			return jsonrpc.AppendErrorResponse(dst, id, jsonrpc.CodeInvalidParams, "unknown tool "+string(p.name)), "", true
		case p.message == nil:
			return jsonrpc.AppendErrorResponse(dst, id, jsonrpc.CodeInvalidParams, "arguments.message must be a string"), "", true
		}
		dst = append(dst, `{"jsonrpc":"2.0","id":`...)
		dst = append(dst, id...)
		dst = append(dst, `,"result":{"content":[{"type":"text","text":`...)
		dst = append(dst, p.message...)
		return append(dst, `}]}}`...), "", true
	case "initialize":
		p, err := walkParams(msg)
		if err != nil {
			return jsonrpc.AppendErrorResponse(dst, id, jsonrpc.CodeParseError, err.Error()), "", true
		}
		v := Negotiate(string(p.version))
		dst = append(dst, `{"jsonrpc":"2.0","id":`...)
		dst = append(dst, id...)
		dst = append(dst, `,"result":{"protocolVersion":"`...)
		dst = append(dst, v...)
		dst = append(dst, `","capabilities":{"tools":{}},`...)
		dst = append(dst, serverInfo...)
		return append(dst, `}}`...), v, true
	case "ping":
		return jsonrpc.AppendResponse(dst, id, nil), "", true
	case "tools/list":
		return jsonrpc.AppendResponse(dst, id, []byte(toolsList)), "", true
	}
	return jsonrpc.AppendErrorResponse(dst, id, jsonrpc.CodeMethodNotFound, "method not found"), "", true
}

// params is what the fixture reads from a request's params. Each field
// aliases the message: name and version are string contents as written
// (escapes are not decoded: the values the fixture compares are plain
// ASCII), message is the raw JSON string token of arguments.message.
type params struct {
	name    []byte
	version []byte
	message []byte
}

// walker is a pooled jsontext decoder reading a message in place.
type walker struct {
	buf bytes.Buffer
	dec jsontext.Decoder
	raw []byte
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

// walkParams finds params.name, params.protocolVersion and
// params.arguments.message in msg, which jsonrpc.Parse has validated.
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
			case "arguments":
				if w.dec.PeekKind() != '{' {
					return w.skip()
				}
				return w.object(func(name []byte) error {
					if string(name) != "message" || w.dec.PeekKind() != '"' {
						return w.skip()
					}
					p.message = w.token()
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
