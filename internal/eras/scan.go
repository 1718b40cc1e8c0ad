package eras

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file walks JSON that jsonrpc.Parse has already validated, to find the
// few members the rest of the package reads (params, params._meta and its
// keys, result, error.code) without decoding anything else, with
// jsonrpc's walking helpers (walk.go there): bytes that did not come from
// Parse make it report "absent", never panic.

// member is one name/value pair of an object, both located in the bytes
// walked; key includes the quotes.
type member struct {
	key, val jsonrpc.Span
	escaped  bool // the key has escape sequences
}

// members walks the members of one object; see objectAt.
type members struct {
	b    []byte
	i    int
	bad  bool
	done bool
}

// objectAt starts a walk of the object at s, which may be absent or not an
// object: then the walk yields nothing.
func objectAt(b []byte, s jsonrpc.Span) members {
	if !s.Present() || s.End > len(b) || b[s.Start] != '{' {
		return members{done: true}
	}
	return members{b: b[:s.End], i: s.Start + 1}
}

// next returns the next member, or false at the end of the object (or at a
// malformation, which also sets w.bad).
func (w *members) next() (member, bool) {
	if w.done {
		return member{}, false
	}
	i := jsonrpc.SkipSpace(w.b, w.i)
	if i < len(w.b) && w.b[i] == ',' {
		i = jsonrpc.SkipSpace(w.b, i+1)
	}
	if i >= len(w.b) || w.b[i] != '"' {
		w.done = true
		w.bad = i >= len(w.b) || w.b[i] != '}'
		return member{}, false
	}
	var m member
	end, escaped := jsonrpc.SkipString(w.b, i)
	if end < 0 {
		w.done, w.bad = true, true
		return member{}, false
	}
	m.key, m.escaped = jsonrpc.Span{Start: i, End: end}, escaped
	i = jsonrpc.SkipSpace(w.b, end)
	if i >= len(w.b) || w.b[i] != ':' {
		w.done, w.bad = true, true
		return member{}, false
	}
	i = jsonrpc.SkipSpace(w.b, i+1)
	if end = jsonrpc.SkipValue(w.b, i); end < 0 {
		w.done, w.bad = true, true
		return member{}, false
	}
	m.val = jsonrpc.Span{Start: i, End: end}
	w.i = end
	return m, true
}

// wholeValue locates the top-level value of b (after whitespace).
func wholeValue(b []byte) jsonrpc.Span {
	i := jsonrpc.SkipSpace(b, 0)
	end := jsonrpc.SkipValue(b, i)
	if end <= i {
		return jsonrpc.Span{}
	}
	return jsonrpc.Span{Start: i, End: end}
}

// find returns the value of the member named name in the object at obj.
func find(b []byte, obj jsonrpc.Span, name string) jsonrpc.Span {
	w := objectAt(b, obj)
	for m, ok := w.next(); ok; m, ok = w.next() {
		if keyIs(b, m, name) {
			return m.val
		}
	}
	return jsonrpc.Span{}
}

// keyIs reports whether m's name, unescaped, is name.
func keyIs(b []byte, m member, name string) bool {
	if !m.escaped {
		return string(b[m.key.Start+1:m.key.End-1]) == name
	}
	s, ok := unquote(b[m.key.Start:m.key.End])
	return ok && s == name
}

// keyReserved reports whether m's name, unescaped, starts with [protocol.MetaPrefix].
func keyReserved(b []byte, m member) bool {
	if !m.escaped {
		name := b[m.key.Start+1 : m.key.End-1]
		return len(name) >= len(protocol.MetaPrefix) && string(name[:len(protocol.MetaPrefix)]) == protocol.MetaPrefix // no allocation
	}
	s, ok := unquote(b[m.key.Start:m.key.End])
	return ok && strings.HasPrefix(s, protocol.MetaPrefix)
}

// textAt returns the content of the string at s, unescaped, and false if s
// is absent or not a string. Without escapes (the usual case) it aliases b
// and allocates nothing, so comparing string(text) costs nothing either.
func textAt(b []byte, s jsonrpc.Span) ([]byte, bool) {
	if !s.Present() || s.Len() < 2 || b[s.Start] != '"' {
		return nil, false
	}
	inner := b[s.Start+1 : s.End-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	u, ok := unquote(b[s.Start:s.End])
	return []byte(u), ok
}

// unquote decodes the JSON string token q, quotes included. Escapes are
// rare in the values read here, so they go through encoding/json.
func unquote(q []byte) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	inner := q[1 : len(q)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return "", false
	}
	return s, true
}

// isObject reports whether s locates an object in b.
func isObject(b []byte, s jsonrpc.Span) bool { return s.Present() && b[s.Start] == '{' }
