package config

import (
	"fmt"
	"strings"
)

// expand replaces ${VAR} and ${VAR:-default} in s with values from lookup.
// As in the shell, the default is used when VAR is unset or empty. A "$"
// not followed by "{" is literal. It returns one message per problem (an
// unset variable without default, a malformed reference); on problems the
// returned string is not meaningful.
//
// special, if not nil, is asked first about every reference: the editor
// variables such as ${workspaceFolder} and ${input:NAME} (editorvars.go).
// It reports whether the reference is one of its own, with its value or a
// problem.
func expand(s string, lookup func(string) (string, bool), special func(ref string) (val, msg string, ok bool)) (string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var (
		b    strings.Builder
		msgs []string
	)
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i+2:]
		end := strings.IndexByte(s, '}')
		if end < 0 {
			msgs = append(msgs, `unterminated "${" (write ${NAME} or ${NAME:-default})`)
			break
		}
		ref := s[:end]
		s = s[end+1:]
		if special != nil {
			if val, msg, ok := special(ref); ok {
				if msg != "" {
					msgs = append(msgs, msg)
				}
				b.WriteString(val)
				continue
			}
		}
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			msgs = append(msgs, fmt.Sprintf("invalid variable reference %q", "${"+ref+"}"))
			continue
		}
		val, ok := lookup(name)
		switch {
		case hasDef && val == "":
			val = def
		case !ok:
			msgs = append(msgs, fmt.Sprintf("environment variable %q is not set", name))
		}
		b.WriteString(val)
	}
	return b.String(), msgs
}

// validVarName reports whether name is a shell variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
