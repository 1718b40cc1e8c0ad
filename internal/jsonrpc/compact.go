package jsonrpc

// AppendCompact appends msg to dst without the whitespace outside its
// strings. Newline-delimited transports (stdio, the bridge's stdout) need
// it: a pretty-printed message is valid JSON-RPC, but its raw newlines would
// split it into several lines on the wire. In valid JSON a raw newline can
// only be whitespace (strings escape it), so for valid JSON the result is
// the same value, with every string and number byte for byte as it was.
// msg is not validated: invalid input stays invalid, it is never made valid.
func AppendCompact(dst, msg []byte) []byte {
	inString, escaped := false, false
	for _, c := range msg {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ', c == '\t', c == '\n', c == '\r':
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
