package conn

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file reads the members of a request's params that say what it
// uses (a tool's or prompt's name, a resource's URI, a completion's ref, a
// call's arguments), for the policy, the limits and the audit log. It
// reads them as strictly as a server might read them loosely: by their
// exact names, keys unescaped, a duplicate member refused, and a member
// spelled like one of them in another case ("Name", "URI") refused too.
// A server decoding with a case-insensitive library (Go's encoding/json)
// would take {"name": "allowed", "Name": "denied"} as a call of "denied",
// one decoding exactly as "allowed": either way, what the gateway checks
// must be what the server runs, so such a request is an error.

// CallParams are what a request's params name.
type CallParams struct {
	Name      string         // params.name
	URI       string         // params.uri
	Arguments jsontext.Value // params.arguments, raw; nil without
	// Ref is params.ref of completion/complete.
	Ref struct{ Type, Name, URI string }
}

// WatchedTop, WatchedParams and WatchedRef are the members ReadParams reads, and the ref's.
var (
	WatchedTop    = []string{"params", "method", "id"}
	WatchedParams = []string{"name", "uri", "arguments", "ref", "requestState"}
	WatchedRef    = []string{"type", "name", "uri"}
)

// errNotObject is the error of params (or a ref) that is not an object.
var errNotObject = errors.New("is not an object")

// ReadParams reads msg's params (a message without params has none). The
// error says which member is ambiguous or malformed, for a -32602 reply.
func ReadParams(msg *jsonrpc.Message) (CallParams, error) {
	var cp CallParams
	top, err := StrictMembers(msg.Raw, WatchedTop)
	if err != nil {
		return cp, errors.New("mcpgate: the request " + err.Error())
	}
	raw, ok := top["params"]
	if !ok {
		return cp, nil
	}
	params, err := StrictMembers(raw, WatchedParams)
	if err != nil {
		return cp, errors.New("mcpgate: params " + err.Error())
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &cp.Name}, {"uri", &cp.URI}} {
		if v, ok := params[f.key]; ok && json.Unmarshal(v, f.dst) != nil {
			return cp, errors.New("mcpgate: params." + f.key + " must be a string")
		}
	}
	if v, ok := params["arguments"]; ok {
		cp.Arguments = v
	}
	if v, ok := params["ref"]; ok {
		ref, err := StrictMembers(v, WatchedRef)
		if err != nil {
			return cp, errors.New("mcpgate: params.ref " + err.Error())
		}
		for _, f := range []struct {
			key string
			dst *string
		}{{"type", &cp.Ref.Type}, {"name", &cp.Ref.Name}, {"uri", &cp.Ref.URI}} {
			if v, ok := ref[f.key]; ok && json.Unmarshal(v, f.dst) != nil {
				return cp, errors.New("mcpgate: params.ref." + f.key + " must be a string")
			}
		}
	}
	return cp, nil
}

// StrictMembers decodes the JSON object raw by member name (unescaped),
// refusing a duplicate name and a name equal to one of watched but in
// another case.
func StrictMembers(raw []byte, watched []string) (map[string]jsontext.Value, error) {
	var m map[string]jsontext.Value
	if err := json.Unmarshal(raw, &m); err != nil {
		if k := jsontext.Value(bytes.TrimSpace(raw)).Kind(); k != '{' {
			return nil, errNotObject
		}
		return nil, errors.New("is not a valid JSON object (a member named twice?)")
	}
	if m == nil {
		return nil, errNotObject
	}
	for k := range m {
		for _, w := range watched {
			if k != w && strings.EqualFold(k, w) {
				return nil, errors.New("has a member " + strconv.Quote(k) + ": write " + strconv.Quote(w))
			}
		}
	}
	return m, nil
}
