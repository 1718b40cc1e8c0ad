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
// keys, result, error.code) without decoding anything else. It trusts the
// validation for correctness but checks every bound, so bytes that did not
// come from Parse make it report "absent", never panic.

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index just past the string whose opening quote is
// at b[i], and whether it contains escapes; -1 if it is unterminated.
func skipString(b []byte, i int) (end int, escaped bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped
		}
	}
	return -1, escaped
}

// skipValue returns the index just past the value starting at b[i] (which
// must not be whitespace), or -1 if it does not end.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i, _ = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			return i
		}
		i++
	}
	return i
}

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
	i := skipSpace(w.b, w.i)
	if i < len(w.b) && w.b[i] == ',' {
		i = skipSpace(w.b, i+1)
	}
	if i >= len(w.b) || w.b[i] != '"' {
		w.done = true
		w.bad = i >= len(w.b) || w.b[i] != '}'
		return member{}, false
	}
	var m member
	end, escaped := skipString(w.b, i)
	if end < 0 {
		w.done, w.bad = true, true
		return member{}, false
	}
	m.key, m.escaped = jsonrpc.Span{Start: i, End: end}, escaped
	i = skipSpace(w.b, end)
	if i >= len(w.b) || w.b[i] != ':' {
		w.done, w.bad = true, true
		return member{}, false
	}
	i = skipSpace(w.b, i+1)
	if end = skipValue(w.b, i); end < 0 {
		w.done, w.bad = true, true
		return member{}, false
	}
	m.val = jsonrpc.Span{Start: i, End: end}
	w.i = end
	return m, true
}

// wholeValue locates the top-level value of b (after whitespace).
func wholeValue(b []byte) jsonrpc.Span {
	i := skipSpace(b, 0)
	end := skipValue(b, i)
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
