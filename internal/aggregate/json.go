package aggregate

import (
	"bytes"
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// The endpoint rewrites a few values in place (a tool's name in a call, in
// a listed tool, a completion's ref) and leaves every other byte as the
// client or the member wrote it, as the rest of the gateway does.

// findString returns the string at path (object members, outermost first)
// in raw, a JSON object, unescaped, and its span (quotes included). Every
// object on the path is read whole, so a duplicate name anywhere on it is
// "absent": the endpoint must not route on one "name" while the member
// reads the other.
func findString(raw []byte, path ...string) (string, jsonrpc.Span, bool) {
	d := jsontext.NewDecoder(bytes.NewReader(raw))
	s, ok := findIn(d, path)
	if !ok || s.Len() < 2 || raw[s.Start] != '"' {
		return "", jsonrpc.Span{}, false
	}
	u, err := jsontext.AppendUnquote(nil, raw[s.Start:s.End])
	if err != nil {
		return "", jsonrpc.Span{}, false
	}
	return string(u), s, true
}

// findIn reads the object at d's position and returns the span of the
// value at path inside it.
func findIn(d *jsontext.Decoder, path []string) (jsonrpc.Span, bool) {
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return jsonrpc.Span{}, false
	}
	var found jsonrpc.Span
	ok := false
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return jsonrpc.Span{}, false // duplicate names end here too
		}
		if name.String() == path[0] {
			if len(path) > 1 {
				if d.PeekKind() != '{' {
					return jsonrpc.Span{}, false
				}
				found, ok = findIn(d, path[1:])
				if !ok {
					return jsonrpc.Span{}, false
				}
				continue
			}
			v, err := d.ReadValue()
			if err != nil {
				return jsonrpc.Span{}, false
			}
			end := int(d.InputOffset())
			found, ok = jsonrpc.Span{Start: end - len(v), End: end}, true
			continue
		}
		if err := d.SkipValue(); err != nil {
			return jsonrpc.Span{}, false
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return jsonrpc.Span{}, false
	}
	return found, ok
}

// quote returns s as a JSON string.
func quote(s string) []byte {
	q, _ := jsontext.AppendQuote(nil, s)
	return q
}

// replaceString returns raw with the value at span replaced by the JSON
// string s.
func replaceString(raw []byte, span jsonrpc.Span, s string) []byte {
	return jsonrpc.Splice(nil, raw, jsonrpc.Edit{Span: span, Value: quote(s)})
}

// paramsOf returns the raw params of a message, or nil.
func paramsOf(raw []byte) []byte {
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Params
}

// rpcError is an error answer of a member, or one the endpoint gives.
type rpcError struct {
	Code    int
	Message string
}

func (e *rpcError) Error() string { return e.Message }

// resultOf splits a member's reply: its result, or its error.
func resultOf(reply []byte) ([]byte, error) {
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		return nil, &rpcError{protocol.CodeInternalError, "mcpgate: unreadable reply: " + err.Error()}
	}
	if r.Error != nil {
		return nil, &rpcError{r.Error.Code, r.Error.Message}
	}
	if r.Result == nil {
		return nil, &rpcError{protocol.CodeInternalError, "mcpgate: reply without result"}
	}
	return r.Result, nil
}
