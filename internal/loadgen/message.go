package loadgen

import (
	"bytes"
	"strconv"
)

// MaxSize is the largest Options.Size: a reply echoes the message, and
// replies are read up to 16 MiB.
const MaxSize = 8 << 20

// fillerPattern pads messages to their size. It is plain ASCII that JSON
// never escapes, so a message is its own JSON string content, and the
// crossed-reply check can compare bytes. A period starts it, so it never
// runs into the digits of the unique part.
const fillerPattern = ".0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// newFiller returns n bytes of fillerPattern repeated, shared read-only by
// every caller of a run.
func newFiller(n int) []byte {
	b := make([]byte, 0, n)
	for len(b) < n {
		b = append(b, fillerPattern[:min(len(fillerPattern), n-len(b))]...)
	}
	return b
}

// buildMessage returns the message of call seq of the caller with prefix,
// built in buf's storage: the unique part (prefix, then seq) first, then
// filler up to size bytes in all; and the length of its unique part. With
// size 0, or smaller than the unique part, the message is the unique part
// alone. filler must hold at least size bytes.
func buildMessage(buf, prefix []byte, seq uint64, size int, filler []byte) (msg []byte, unique int) {
	msg = strconv.AppendUint(append(buf[:0], prefix...), seq, 10)
	unique = len(msg)
	if pad := size - unique; pad > 0 {
		msg = append(msg, filler[:pad]...)
	}
	return msg, unique
}

// What message of the run a reply's text carries (whose).
const (
	echoOwn   = iota // this call's: its unique part, not run into more digits
	echoOther        // another call's: the run's mark, and not this call's unique part
	echoNone         // none: the server does not echo
)

// whose tells which message of the run text carries, for the call whose
// message is msg with unique part msg[:unique]. Every message of a run
// starts with the run's mark, its nonce and a hyphen (Run's prefixes and
// first calls' messages), which other text is most unlikely to hold. The
// unique part must not run into a digit: "x-s0-c0-1" is not "x-s0-c0-10".
// It is looked for anywhere in text, so that a server wrapping its echo
// ("Echo: " + message) is seen echoing this call's message.
func whose(text, msg []byte, unique int) int {
	own := msg[:unique]
	if ownAt(text, own, 0) {
		return echoOwn // the fast path: a megabyte echo is not searched
	}
	for i := 1; i < len(text); {
		j := bytes.Index(text[i:], own)
		if j < 0 {
			break
		}
		if ownAt(text, own, i+j) {
			return echoOwn
		}
		i += j + 1
	}
	if bytes.Contains(text, runMark(msg)) {
		return echoOther
	}
	return echoNone
}

// ownAt reports whether own is at text[i:] and not followed by a digit.
func ownAt(text, own []byte, i int) bool {
	end := i + len(own)
	return bytes.HasPrefix(text[i:], own) && (end == len(text) || text[end] < '0' || text[end] > '9')
}

// runMark is the start of msg every message of its run shares: up to its
// first hyphen, included (all of msg if it has none).
func runMark(msg []byte) []byte {
	if i := bytes.IndexByte(msg, '-'); i >= 0 {
		return msg[:i+1]
	}
	return msg
}
