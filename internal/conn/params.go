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
// It reads what StrictMembers would, in one validating pass over the
// message (RFC 7493: a name twice in any object, at any depth, is an
// error) and a walk of the members it needs: nothing is decoded but the
// strings returned, and Arguments are msg's own bytes (not copied).
func ReadParams(msg *jsonrpc.Message) (CallParams, error) {
	var cp CallParams
	if !jsontext.Value(msg.Raw).IsValid() {
		if k := jsontext.Value(bytes.TrimSpace(msg.Raw)).Kind(); k != '{' {
			return cp, errors.New("mcpgate: the request " + errNotObject.Error())
		}
		return cp, errors.New("mcpgate: the request is not a valid JSON object (a member named twice?)")
	}
	var params []byte
	err := eachMember(msg.Raw, WatchedTop, func(name, val []byte) {
		if string(name) == "params" {
			params = val
		}
	})
	if err != nil {
		return cp, errors.New("mcpgate: the request " + err.Error())
	}
	if params == nil {
		return cp, nil
	}
	var name, uri, ref []byte
	err = eachMember(params, WatchedParams, func(k, val []byte) {
		switch string(k) {
		case "name":
			name = val
		case "uri":
			uri = val
		case "arguments":
			cp.Arguments = val
		case "ref":
			ref = val
		}
	})
	if err != nil {
		return cp, errors.New("mcpgate: params " + err.Error())
	}
	if cp.Name, err = stringValue(name); err != nil {
		return cp, errors.New("mcpgate: params.name must be a string")
	}
	if cp.URI, err = stringValue(uri); err != nil {
		return cp, errors.New("mcpgate: params.uri must be a string")
	}
	if ref == nil {
		return cp, nil
	}
	var rt, rn, ru []byte
	err = eachMember(ref, WatchedRef, func(k, val []byte) {
		switch string(k) {
		case "type":
			rt = val
		case "name":
			rn = val
		case "uri":
			ru = val
		}
	})
	if err != nil {
		return cp, errors.New("mcpgate: params.ref " + err.Error())
	}
	if cp.Ref.Type, err = stringValue(rt); err != nil {
		return cp, errors.New("mcpgate: params.ref.type must be a string")
	}
	if cp.Ref.Name, err = stringValue(rn); err != nil {
		return cp, errors.New("mcpgate: params.ref.name must be a string")
	}
	if cp.Ref.URI, err = stringValue(ru); err != nil {
		return cp, errors.New("mcpgate: params.ref.uri must be a string")
	}
	return cp, nil
}

// errNotString is stringValue's error.
var errNotString = errors.New("not a string")

// stringValue decodes the JSON value v, a member ReadParams read: ""
// when absent or null (as decoding into a string leaves it), else it
// must be a string.
func stringValue(v []byte) (string, error) {
	switch {
	case v == nil || string(v) == "null":
		return "", nil
	case v[0] != '"':
		return "", errNotString
	case bytes.IndexByte(v, '\\') < 0:
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", errNotString
	}
	return s, nil
}

// eachMember calls f with each member of the JSON object obj (valid
// JSON, as ReadParams checked: no name twice), its name unescaped and
// its value as it is, refusing a name equal to one of watched in another
// case; errNotObject if obj is not an object.
func eachMember(obj []byte, watched []string, f func(name, val []byte)) error {
	i := jsonrpc.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	for i++; ; {
		i = jsonrpc.SkipSpace(obj, i)
		if i < len(obj) && obj[i] == ',' {
			i = jsonrpc.SkipSpace(obj, i+1)
		}
		if i >= len(obj) || obj[i] != '"' {
			return nil // the closing brace (obj is valid)
		}
		end := jsonrpc.SkipValue(obj, i)
		if end < 0 {
			return errors.New("is not a valid JSON object")
		}
		name := obj[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			if json.Unmarshal(obj[i:end], &s) != nil {
				return errors.New("is not a valid JSON object")
			}
			name = []byte(s)
		}
		for _, w := range watched {
			if string(name) != w && strings.EqualFold(string(name), w) {
				return errors.New("has a member " + strconv.Quote(string(name)) + ": write " + strconv.Quote(w))
			}
		}
		i = jsonrpc.SkipSpace(obj, end)
		i = jsonrpc.SkipSpace(obj, i+1) // past ':'
		if end = jsonrpc.SkipValue(obj, i); end < 0 {
			return errors.New("is not a valid JSON object")
		}
		f(name, obj[i:end:end])
		i = end
	}
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
