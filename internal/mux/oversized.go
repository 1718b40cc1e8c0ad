package mux

import "bytes"

// envelopeID returns the numeric "id" member of the top-level object that
// prefix, the first bytes of a message too long to read whole, begins, if
// those bytes show it whole. Only the envelope's own member counts: an
// "id" inside params or a result (a tool's records, a string that quotes
// JSON) names no call of ours, and failing the call of that number would
// answer another client's request with this reply's error. A number that
// reaches the end of prefix may be cut short, so it is not trusted either.
func envelopeID(prefix []byte) (uint64, bool) {
	depth := 0
	for i := 0; i < len(prefix); i++ {
		switch prefix[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := stringEnd(prefix, i+1)
			if end < 0 {
				return 0, false // cut inside a string
			}
			if depth == 1 && string(prefix[i+1:end]) == "id" {
				rest := bytes.TrimLeft(prefix[end+1:], " \t\r\n")
				if len(rest) > 0 && rest[0] == ':' {
					rest = bytes.TrimLeft(rest[1:], " \t\r\n")
					j := 0
					for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
						j++
					}
					if j == len(rest) {
						return 0, false
					}
					return parseUint(rest[:j])
				}
			}
			i = end
		}
	}
	return 0, false
}

// stringEnd returns the index of the quote that ends the JSON string whose
// contents start at b[i], or -1 if b ends first.
func stringEnd(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}
