package eras

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file holds the rules of the reverse bridge: a client of the
// session eras in front of a server that speaks only 2026-07-28. The
// gateway answers initialize from the server's server/discover
// ([InitializeResult]), sends each request on with the revision's
// per-request _meta ([BridgeRequest]), and turns an input_required result
// ([ParseInputRequired]) into server requests to the client, retrying with
// the answers.

// InitializeResult returns the initialize result a client of the session
// eras gets for a server whose server/discover result is discover:
// protocolVersion version (the one negotiated with the client), the
// server's capabilities and instructions, and its serverInfo, which
// 2026-07-28 puts in _meta (a top-level serverInfo is taken too, and a
// placeholder naming the gateway's bridge when there is neither: the field
// is required). Values are copied as the server wrote them.
func InitializeResult(discover []byte, version string) ([]byte, error) {
	var d struct {
		Capabilities json.RawMessage            `json:"capabilities"`
		Instructions json.RawMessage            `json:"instructions"`
		ServerInfo   json.RawMessage            `json:"serverInfo"`
		Meta         map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(discover, &d); err != nil {
		return nil, fmt.Errorf("modern: server/discover result: %w", err)
	}
	if len(d.Capabilities) == 0 || d.Capabilities[0] != '{' {
		return nil, errors.New("modern: server/discover result has no capabilities object")
	}
	info := d.Meta[protocol.MetaServerInfo]
	if !rawObject(info) {
		info = d.ServerInfo
	}
	if !rawObject(info) {
		info = json.RawMessage(`{"name":"unknown (a ` + protocol.StatelessVersion + ` server)","version":"0"}`)
	}
	out := struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    json.RawMessage `json:"instructions,omitempty"`
	}{ProtocolVersion: version, Capabilities: d.Capabilities, ServerInfo: info}
	if len(d.Instructions) > 0 && d.Instructions[0] == '"' {
		out.Instructions = d.Instructions
	}
	return marshal(out)
}

// rawObject reports whether v is a JSON object (as json.RawMessage holds
// it: no leading whitespace).
func rawObject(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }

// marshal encodes v without escaping <, > and & (a server's strings come
// out as it wrote them) and without the Encoder's newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// BridgeRequest returns request msg (parsed by [jsonrpc.Parse]) as the
// gateway sends it to a 2026-07-28 server: with id, and with meta's
// members set in params._meta (replacing members of the same name the
// client sent, and any other io.modelcontextprotocol/* key, which are the
// revision's and the gateway's to set) and params's members set from
// params (inputResponses and requestState on a retry). The client's other
// _meta members (progressToken among them) and params are kept. Values in
// meta and params must be valid JSON.
func BridgeRequest(msg *jsonrpc.Message, id []byte, meta, params map[string]json.RawMessage) ([]byte, error) {
	if msg.Kind != jsonrpc.KindRequest {
		return nil, errors.New("modern: not a request")
	}
	p := map[string]json.RawMessage{}
	if raw := msg.Bytes(msg.Params); len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil || p == nil {
			return nil, errors.New("modern: request params are not an object")
		}
	}
	m := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return nil, errors.New("modern: params._meta is not an object")
		}
	}
	for k := range m {
		if reserved(k) {
			delete(m, k)
		}
	}
	for k, v := range meta {
		m[k] = v
	}
	for k, v := range params {
		p[k] = v
	}
	encMeta, err := marshal(m)
	if err != nil {
		return nil, fmt.Errorf("modern: _meta: %w", err)
	}
	p["_meta"] = encMeta
	encParams, err := marshal(p)
	if err != nil {
		return nil, fmt.Errorf("modern: params: %w", err)
	}
	return jsonrpc.Request(id, msg.MethodName(), encParams), nil
}

// reserved reports whether a decoded _meta key is the revision's.
func reserved(key string) bool {
	return strings.HasPrefix(key, protocol.MetaPrefix)
}

// InputRequest is one request of an input_required result: what the
// server asks the client, under the key it chose.
type InputRequest struct {
	Key    string
	Method string
	Params json.RawMessage // nil when the server gave none
}

// InputRequired is an input_required result: the requests, in key order
// (deterministic), and the state the retry must echo (nil: none).
type InputRequired struct {
	Requests []InputRequest
	State    json.RawMessage // a JSON string, as the server wrote it
}

// maxInputRequests bounds the requests one input_required result may make
// of the client through the gateway.
const maxInputRequests = 32

// ParseInputRequired reports whether reply, a JSON-RPC response, is an
// input_required result, and returns its requests and state. It is an
// error for such a result to carry neither, to ask with a method the
// revision does not allow in inputRequests, to repeat or omit the method,
// to hold more than 32 requests, or to have a requestState that is not a
// string.
func ParseInputRequired(reply []byte) (InputRequired, bool, error) {
	var r struct {
		Result *struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  json.RawMessage            `json:"requestState"`
		} `json:"result"`
	}
	if !bytes.Contains(reply, []byte("input_required")) {
		return InputRequired{}, false, nil // the common case: no decoding
	}
	if json.Unmarshal(reply, &r) != nil || r.Result == nil || r.Result.ResultType != "input_required" {
		return InputRequired{}, false, nil
	}
	var out InputRequired
	if s := r.Result.RequestState; len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		if s[0] != '"' {
			return out, true, errors.New("modern: input_required requestState is not a string")
		}
		out.State = s
	}
	if len(r.Result.InputRequests) > maxInputRequests {
		return out, true, fmt.Errorf("modern: input_required asks %d inputs (at most %d)", len(r.Result.InputRequests), maxInputRequests)
	}
	for _, key := range slices.Sorted(maps.Keys(r.Result.InputRequests)) {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(r.Result.InputRequests[key], &req); err != nil {
			return out, true, fmt.Errorf("modern: input_required inputRequests[%q] is not a request object", key)
		}
		if !protocol.IsServerRequest(req.Method) {
			return out, true, fmt.Errorf("modern: input_required inputRequests[%q] has method %q (allowed: sampling/createMessage, elicitation/create, roots/list)", key, req.Method)
		}
		if bytes.Equal(req.Params, []byte("null")) {
			req.Params = nil
		}
		out.Requests = append(out.Requests, InputRequest{Key: key, Method: req.Method, Params: req.Params})
	}
	if len(out.Requests) == 0 && out.State == nil {
		return out, true, errors.New("modern: input_required result has neither inputRequests nor requestState")
	}
	return out, true, nil
}

// KeyInputKey is the _meta key of a server request the gateway makes of a
// client on behalf of a 2026-07-28 server's input request (the reverse
// bridge): the key the server gave it in inputRequests. When such a
// request reaches a client of 2026-07-28 again (through an aggregating
// endpoint, say), its input_required uses that key rather than one of the
// gateway's, so the server's names survive the round.
const KeyInputKey = "io.mcpgate/inputKey"

// WithInputKey returns params (a JSON object, or nil) with
// _meta[KeyInputKey] set to key; params that are not an object are
// returned as they are.
func WithInputKey(params json.RawMessage, key string) json.RawMessage {
	p := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil || p == nil {
			return params
		}
	}
	m := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok {
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return params
		}
	}
	k, _ := json.Marshal(key)
	m[KeyInputKey] = k
	encMeta, err := marshal(m)
	if err != nil {
		return params
	}
	p["_meta"] = encMeta
	out, err := marshal(p)
	if err != nil {
		return params
	}
	return out
}

// InputKey returns _meta[KeyInputKey] of a server request (see
// KeyInputKey), or "".
func InputKey(msg *jsonrpc.Message) string {
	if !bytes.Contains(msg.Raw, []byte("io.mcpgate/inputKey")) {
		return ""
	}
	var r struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(msg.Raw, &r) != nil {
		return ""
	}
	var key string
	if json.Unmarshal(r.Params.Meta[KeyInputKey], &key) != nil {
		return ""
	}
	return key
}
