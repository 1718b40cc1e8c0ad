package jsonrpc

import "bytes"

// PrefixID returns the digits of the numeric "id" member of the top-level
// object that prefix, the first bytes of a message too long to read whole,
// begins, if those bytes show it whole; nil otherwise. Only the envelope's
// own member counts: an "id" inside params or a result (a tool's records,
// a string that quotes JSON) is another message's business. A number that
// reaches the end of prefix may be cut short, so it is not returned either.
// Unlike Parse it checks nothing: prefix is not a whole message.
func PrefixID(prefix []byte) []byte {
	depth := 0
	for i := 0; i < len(prefix); i++ {
		switch prefix[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			past, _ := SkipString(prefix, i) // walk.go: nothing checked, as a prefix needs
			if past < 0 {
				return nil // cut inside a string
			}
			end := past - 1 // the closing quote
			if depth == 1 && string(prefix[i+1:end]) == "id" {
				rest := bytes.TrimLeft(prefix[end+1:], " \t\r\n")
				if len(rest) > 0 && rest[0] == ':' {
					rest = bytes.TrimLeft(rest[1:], " \t\r\n")
					j := 0
					for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
						j++
					}
					if j == 0 || j == len(rest) {
						return nil
					}
					return rest[:j]
				}
			}
			i = end
		}
	}
	return nil
}
