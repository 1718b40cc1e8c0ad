package jsonrpc

// This file is for walking JSON that Parse (or encoding/json) has already
// validated, to locate a few members without decoding anything else: the
// eras' checks of params._meta, the front's tools/call arguments. These
// functions do not validate; they trust it for correctness but check
// every bound, so bytes that were not validated make them report an end
// of -1, never panic.

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int { return skipSpace(b, i) }

// SkipString returns the index just past the string whose opening quote
// is at b[i], and whether it contains escapes; -1 if it does not end.
func SkipString(b []byte, i int) (end int, escaped bool) {
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

// SkipValue returns the index just past the value that starts at b[i]
// (not whitespace), or -1 if it does not end within b.
func SkipValue(b []byte, i int) int {
	if i < 0 || i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := SkipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i, _ = SkipString(b, i); i < 0 {
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
