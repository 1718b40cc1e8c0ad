package loadgen

import "strconv"

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
