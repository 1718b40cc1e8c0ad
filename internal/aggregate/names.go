package aggregate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/auth"
)

// This file is the naming of the endpoint's tools and prompts and the
// filters: pure functions of the options, shared by every era. The
// reverse mapping is never computed from an exposed name (a hash cannot be
// undone, snake_case loses case): it is a table built from the members'
// lists (see view.go), so that every exposed name routes back exactly.

// naming turns a member's tool or prompt name into the name the endpoint
// exposes.
type naming struct {
	sep   string // between prefix and name
	max   int    // longest exposed name, in bytes
	snake bool   // snake_case prefix and name
}

// hashLen is the length of a shortened name's suffix: '_' and 8 hex digits
// of SHA-256 (32 bits: two long names of one endpoint sharing their
// first max-9 bytes and their hash would be reported as a collision,
// never silently merged).
const hashLen = 9

// expose returns the exposed name of a member's name: prefix, separator
// and name (just the name for an empty prefix), each in snake_case when
// asked, then shortened to max bytes if longer.
func (n naming) expose(prefix, name string) string {
	if n.snake {
		prefix, name = snakeCase(prefix), snakeCase(name)
	}
	full := name
	if prefix != "" {
		full = prefix + n.sep + name
	}
	return n.shorten(full)
}

// exposedPrefix is what every exposed name of a member with this prefix
// starts with ("" for none), before shortening: a name that starts with it
// belongs to that member, which is how a call to a member that is down
// (whose names are not known) is told apart from a name nobody has.
func (n naming) exposedPrefix(prefix string) string {
	if prefix == "" {
		return ""
	}
	if n.snake {
		prefix = snakeCase(prefix)
	}
	return prefix + n.sep
}

// shorten cuts a name longer than max bytes and appends a hash of the
// whole name, so that the result is stable (across sessions, restarts and
// gateways: it depends on the name alone) and names sharing a long
// beginning stay apart. The cut never splits a UTF-8 sequence.
func (n naming) shorten(full string) string {
	if len(full) <= n.max {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	keep := max(n.max-hashLen, 0)
	cut := full[:keep]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return cut + "_" + hex.EncodeToString(sum[:4])
}

// snakeCase lower-cases s and separates its words with '_': "getUserID"
// and "get-user-id" are "get_user_id", "HTTPServer" is "http_server".
// Characters other than letters and digits become '_'. Lossy on purpose:
// the reverse mapping is a table, and two names it maps to the same one
// are a collision, reported.
func snakeCase(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 4)
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsUpper(r):
			if i > 0 && lastByte(&b) != '_' {
				prev := rs[i-1]
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
					b.WriteByte('_')
				}
			}
			b.WriteRune(unicode.ToLower(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func lastByte(b *strings.Builder) byte {
	s := b.String()
	if s == "" {
		return 0
	}
	return s[len(s)-1]
}

// allows reports whether g lets name through: it matches an allow pattern
// (or there are none) and no deny pattern.
func (g Globs) allows(name string) bool {
	if len(g.Allow) > 0 && !matchAny(g.Allow, name) {
		return false
	}
	return !matchAny(g.Deny, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// check returns an error naming the first bad pattern of g, at field
// (e.g. `server "a": tools`).
func (g Globs) check(field string) error {
	for _, l := range []struct {
		key  string
		pats []string
	}{{"allow", g.Allow}, {"deny", g.Deny}} {
		for i, p := range l.pats {
			// path.Match checks the whole pattern whatever the name.
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return fmt.Errorf("%s.%s[%d]: %q is not a valid pattern (path.Match syntax)", field, l.key, i, p)
			}
		}
	}
	return nil
}

// globs returns f's patterns for items of kind k (templates are resources).
func (f *Filter) globs(k kind) *Globs {
	switch k {
	case kindTools:
		return &f.Tools
	case kindPrompts:
		return &f.Prompts
	}
	return &f.Resources
}

// allowed reports whether the member's and the endpoint's filters both let
// an item of kind k through, by its own name (tools, prompts) or URI or
// URI template (resources, templates).
func (e *Endpoint) allowed(member int, k kind, key string) bool {
	return e.member(member).Filter.globs(k).allows(key) && e.opts.Filter.globs(k).allows(key)
}

// admits reports whether member m's filter and policy (for principal p)
// and the endpoint's filter let an item of kind k through: allowed, for
// the member as a session's table has it (the views are built so).
func (e *Endpoint) admits(m *Member, p *auth.Principal, k kind, key string) bool {
	return m.Filter.globs(k).allows(key) && e.opts.Filter.globs(k).allows(key) &&
		(m.Policy == nil || m.Policy.Allows(p, policyKind(k), key, nil))
}

// allowed is the endpoint's allowed, and the member's policy for the
// session's principal.
func (c *clientSession) allowed(member int, k kind, key string) bool {
	if !c.e.allowed(member, k, key) {
		return false
	}
	pol := c.e.policy(member)
	return pol == nil || pol.Allows(c.who(), policyKind(k), key, nil)
}

// policyKind is the Policy kind of items of kind k.
func policyKind(k kind) string {
	switch k {
	case kindTools:
		return "tool"
	case kindPrompts:
		return "prompt"
	}
	return "resource"
}
