package echoserver

import (
	"bytes"
	"time"
)

// Options change what answering echo costs the fixture, for benchmarks that
// must measure something other than the fixture itself. The zero value is
// the default fixture: every message parsed and checked, no extra work.
type Options struct {
	// Scan answers a tools/call echo written the way `mcpgate bench` writes
	// it (see scanEcho) from a scan of its bytes, without parsing or
	// validating it: the reply copies the request's id and message token
	// as they are. Any other message is parsed as usual. With it a large
	// payload costs the fixture little more than copying it, so that a
	// payload benchmark measures the gateway between client and fixture,
	// not the fixture's JSON parser. Default false.
	Scan bool
	// Burn is CPU time each tools/call echo spends in a busy loop before
	// it is answered (not a sleep: the time is the calling thread's CPU
	// time, see burnCPU), so that a benchmark can make a server whose
	// speed is bounded by its CPU. On stdio calls are answered one after
	// another by one goroutine, so a child serves at most 1/Burn calls a
	// second. Default 0: none.
	Burn time.Duration
}

// reply appends the reply to msg, as appendReply does, under o.
func (o *Options) reply(dst, msg []byte, lines bool) (out []byte, version string, replied bool) {
	if o != nil && o.Scan {
		if out, ok := appendScanned(dst, msg); ok {
			o.spend()
			return out, "", true
		}
	}
	return appendReply(dst, msg, lines, o)
}

// spend burns o.Burn of CPU time, if any.
func (o *Options) spend() {
	if o != nil && o.Burn > 0 {
		burnCPU(o.Burn)
	}
}

// The shape of a tools/call echo that Scan answers without parsing: the
// members in this order, no whitespace, no _meta, the message the last
// member of the last two objects. It is how `mcpgate bench` writes a call
// of a session era, and how the gateway forwards it (the id replaced).
const (
	scanHead = `{"jsonrpc":"2.0","id":`
	scanMid  = `,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`
	scanTail = `"}}}`
)

// appendScanned appends the reply to msg if msg has the shape above with
// an id that is an integer or a string without escapes, and whose message
// is one string token (no unescaped quote inside); ok is false, having
// appended nothing, for anything else. Nothing else is checked: a message
// with invalid escapes or bytes inside the string is echoed as it is.
func appendScanned(dst, msg []byte) (out []byte, ok bool) {
	if !bytes.HasPrefix(msg, []byte(scanHead)) || !bytes.HasSuffix(msg, []byte(scanTail)) {
		return dst, false
	}
	rest := msg[len(scanHead):]
	n := idLen(rest)
	if n == 0 || !bytes.HasPrefix(rest[n:], []byte(scanMid)) {
		return dst, false
	}
	id := rest[:n]
	start := len(scanHead) + n + len(scanMid) - 1 // the message's opening quote
	end := len(msg) - len(scanTail) + 1           // just past its closing quote
	if end < start+2 || !oneString(msg[start+1:end-1]) {
		return dst, false
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":{"content":[{"type":"text","text":`...)
	dst = append(dst, msg[start:end]...)
	return append(dst, `}]}}`...), true
}

// idLen returns the length of the id token at the start of b: an integer
// (an optional minus, then digits) or a string with no backslash; 0 if
// there is none.
func idLen(b []byte) int {
	if len(b) > 0 && b[0] == '"' {
		i := bytes.IndexByte(b[1:], '"')
		if i < 0 || bytes.IndexByte(b[1:1+i], '\\') >= 0 {
			return 0
		}
		return i + 2
	}
	i := 0
	if len(b) > 0 && b[0] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == digits {
		return 0
	}
	return i
}

// oneString reports whether s, the content between a string's quotes,
// holds no unescaped quote and does not end in an escaping backslash, so
// that the quotes around it delimit one string token.
func oneString(s []byte) bool {
	for from := 0; ; {
		i := bytes.IndexByte(s[from:], '"')
		if i < 0 {
			break
		}
		if !escaped(s, from+i) {
			return false
		}
		from += i + 1
	}
	return !escaped(s, len(s))
}

// escaped reports whether the byte at s[i] (or the end, for i == len(s))
// follows an odd number of backslashes.
func escaped(s []byte, i int) bool {
	n := 0
	for i-n-1 >= 0 && s[i-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}
