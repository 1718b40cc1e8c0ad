package jsonrpc

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Object names are compared after unescaping, as jsontext does: "id" and
// "\u0069d" are the same name. The names Parse reads are short and almost
// never escaped, so they are compared in place, decoding escapes on the
// fly, without a buffer.

// smallNames is how many names a nameSet compares pairwise before it
// switches to a map. The objects Parse walks have a handful of members.
const smallNames = 16

// nameSet finds duplicate names among the members of one object.
type nameSet struct {
	n       int
	escaped uint32 // bit k: names[k] has escape sequences
	names   [smallNames]Span
	big     map[string]struct{} // every name, unescaped, once n > smallNames
}

// add records the name whose content (between the quotes, still escaped)
// is b[s.Start:s.End] and reports whether the object already had it.
func (ns *nameSet) add(b []byte, s Span, escaped bool) (dup bool) {
	name := b[s.Start:s.End]
	if ns.n < smallNames {
		for k, o := range ns.names[:ns.n] {
			oEscaped := ns.escaped&(1<<k) != 0
			if !escaped && !oEscaped {
				if bytes.Equal(name, b[o.Start:o.End]) {
					return true
				}
			} else if equalUnquoted(name, b[o.Start:o.End]) {
				return true
			}
		}
		if escaped {
			ns.escaped |= 1 << ns.n
		}
		ns.names[ns.n] = s
		ns.n++
		return false
	}
	if ns.big == nil {
		ns.big = make(map[string]struct{}, 2*smallNames)
		for k, o := range ns.names {
			ns.big[unquoted(b[o.Start:o.End], ns.escaped&(1<<k) != 0)] = struct{}{}
		}
	}
	ns.n++
	key := unquoted(name, escaped)
	if _, ok := ns.big[key]; ok {
		return true
	}
	ns.big[key] = struct{}{}
	return false
}

// unquoted returns the validated string content raw, unescaped.
func unquoted(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	var q []byte
	q = append(append(append(q, '"'), raw...), '"')
	u, _ := jsontext.AppendUnquote(nil, q)
	return string(u)
}

// lookup returns the element of known that the validated string content
// raw spells, or "" if none does.
func lookup(raw []byte, escaped bool, known ...string) string {
	for _, k := range known {
		if !escaped && string(raw) == k || escaped && equalUnquoted(raw, []byte(k)) {
			return k
		}
	}
	return ""
}

// isString reports whether the validated string content raw spells s.
func isString(raw []byte, s string) bool {
	return lookup(raw, bytes.IndexByte(raw, '\\') >= 0, s) != ""
}

// equalUnquoted reports whether two validated string contents, each
// possibly escaped, spell the same text.
func equalUnquoted(a, b []byte) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ra, rb rune
		ra, i = nextRune(a, i)
		rb, j = nextRune(b, j)
		if ra != rb {
			return false
		}
	}
	return i == len(a) && j == len(b)
}

// nextRune decodes the character at s[i] of validated string content,
// whether written as is or as an escape sequence, and returns the index
// after it. Invalid input cannot reach it: scanString has checked s.
func nextRune(s []byte, i int) (rune, int) {
	c := s[i]
	if c != '\\' {
		if c < utf8.RuneSelf {
			return rune(c), i + 1
		}
		r, n := utf8.DecodeRune(s[i:])
		return r, i + n
	}
	switch c = s[i+1]; c {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r, _ := scanHex(s, i)
		if !utf16.IsSurrogate(r) {
			return r, i + 6
		}
		r2, _ := scanHex(s, i+6)
		return utf16.DecodeRune(r, r2), i + 12
	}
	return rune(c), i + 2 // '"', '\\' or '/'
}
