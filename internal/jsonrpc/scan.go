package jsonrpc

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the validator Parse and SplitBatch use for the values they
// only pass through (params.arguments, result, error.data...). With
// checkUTF8 first, it accepts exactly what jsontext accepts with
// AllowDuplicateNames (RFC 8259 syntax, UTF-8, no control characters in
// strings, valid escapes and no lone surrogate escapes, nesting up to
// maxDepth) without looking at names: duplicate names there are for the end
// server to judge, as a forwarding proxy should
// (FuzzSkipValueAgreesWithJSONText checks the agreement). It never
// allocates unless nesting goes past 256 levels, never recurses, and scans
// strings sixteen bytes at a time.

// maxDepth is how deeply arrays and objects may nest, as in jsontext.
const maxDepth = 10000

// scanErr says what is wrong with the input; parseError turns it into an
// error. The scanners return it with an offset rather than an error so that
// the valid path does no formatting.
type scanErr uint8

const (
	scanOK      scanErr = iota
	scanEOF             // input ends inside a value
	scanChar            // a byte that cannot appear where it is
	scanUTF8            // invalid UTF-8
	scanControl         // unescaped control character in a string
	scanEscape          // invalid escape sequence, including a lone surrogate
	scanDepth           // nesting deeper than maxDepth
)

// parseError describes the error found at b[off].
func parseError(b []byte, off int, e scanErr) error {
	switch e {
	case scanEOF:
		return fmt.Errorf("%w: unexpected end of input", ErrParse)
	case scanChar:
		r, _ := utf8.DecodeRune(b[off:])
		return fmt.Errorf("%w: invalid character %q at offset %d", ErrParse, r, off)
	case scanUTF8:
		return fmt.Errorf("%w: invalid UTF-8 at offset %d", ErrParse, off)
	case scanControl:
		return fmt.Errorf("%w: invalid control character %q in string at offset %d", ErrParse, b[off], off)
	case scanEscape:
		return fmt.Errorf("%w: invalid escape sequence %q at offset %d", ErrParse, b[off:min(off+12, len(b))], off)
	case scanDepth:
		return fmt.Errorf("%w: nesting deeper than %d at offset %d", ErrParse, maxDepth, off)
	}
	return fmt.Errorf("%w: at offset %d", ErrParse, off) // unreachable
}

// checkUTF8 reports invalid UTF-8 anywhere in b. Outside strings a byte of
// 0x80 or more is a syntax error anyway, so checking all of b once is as
// strict as checking each string, and much faster: utf8.Valid passes over
// ASCII at tens of GB/s.
func checkUTF8(b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	off := 0
	for {
		r, n := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && n <= 1 {
			return parseError(b, off, scanUTF8)
		}
		off += n
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipValue validates the JSON value starting at or after b[i] (after
// whitespace) and returns the index just past it. depth is the number of
// arrays and objects already open around the value. b must have passed
// checkUTF8. On error it returns the offset of the fault.
func skipValue(b []byte, i, depth int) (int, scanErr) {
	// Bit k of the stack is set when the k-th open container is an object.
	var small [4]uint64
	stack := small[:]
	n := 0 // containers opened here and not yet closed
	var e scanErr
values:
	for {
		// A value is expected at b[i].
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, scanEOF
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth+n >= maxDepth {
				return i, scanDepth
			}
			if n>>6 == len(stack) {
				stack = append(stack, 0)
			}
			if c == '{' {
				stack[n>>6] |= 1 << (n & 63)
			} else {
				stack[n>>6] &^= 1 << (n & 63)
			}
			n++
			if i = skipSpace(b, i+1); i >= len(b) {
				return i, scanEOF
			}
			if b[i] != c+2 { // not the matching '}' or ']': a first member or element
				if c == '{' {
					if i, e = skipName(b, i); e != scanOK {
						return i, e
					}
				}
				continue values
			}
			i++
			n--
		case '"':
			if i, _, e = scanString(b, i); e != scanOK {
				return i, e
			}
		case 't':
			if i, e = scanLiteral(b, i, "true"); e != scanOK {
				return i, e
			}
		case 'f':
			if i, e = scanLiteral(b, i, "false"); e != scanOK {
				return i, e
			}
		case 'n':
			if i, e = scanLiteral(b, i, "null"); e != scanOK {
				return i, e
			}
		default:
			if i, e = scanNumber(b, i); e != scanOK {
				return i, e
			}
		}

		// A value ended at b[i]: close containers until another value is due.
		for n > 0 {
			if i = skipSpace(b, i); i >= len(b) {
				return i, scanEOF
			}
			inObject := stack[(n-1)>>6]&(1<<((n-1)&63)) != 0
			switch c := b[i]; {
			case c == ',':
				if inObject {
					if i = skipSpace(b, i+1); i >= len(b) {
						return i, scanEOF
					}
					if i, e = skipName(b, i); e != scanOK {
						return i, e
					}
				} else {
					i++
				}
				continue values
			case c == '}' && inObject, c == ']' && !inObject:
				i++
				n--
			default:
				return i, scanChar
			}
		}
		return i, scanOK
	}
}

// skipName validates an object member's name at b[i] and the colon after
// it, and returns the index after the colon.
func skipName(b []byte, i int) (int, scanErr) {
	if b[i] != '"' {
		return i, scanChar
	}
	i, _, e := scanString(b, i)
	if e != scanOK {
		return i, e
	}
	return skipColon(b, i)
}

// skipColon validates the colon, after optional whitespace, that follows a
// name ending at b[i], and returns the index after it.
func skipColon(b []byte, i int) (int, scanErr) {
	if i = skipSpace(b, i); i >= len(b) {
		return i, scanEOF
	}
	if b[i] != ':' {
		return i, scanChar
	}
	return i + 1, scanOK
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special flags the bytes of the little-endian word w that end a run of
// plain string content: '"', '\\' and control characters. The lowest
// flagged byte is the first such byte; flags above it may be false (the
// subtractions borrow only upwards from a true match). x maps '"' to 0x20
// and control characters to control characters, so that one comparison
// with 0x21 finds both.
func special(w uint64) uint64 {
	x, y := w^(lsb*0x02), w^(lsb*'\\')
	return ((x-lsb*0x21)&^x | (y-lsb)&^y) & msb
}

// scanString validates the JSON string starting at b[i] == '"' and returns
// the index after its closing quote and whether it has escape sequences.
// b must be valid UTF-8 (Parse and SplitBatch check all of it first, which
// costs little), so that only the ASCII bytes need looking at: runs of
// other bytes are passed over sixteen bytes at a time.
func scanString(b []byte, i int) (end int, escaped bool, e scanErr) {
	i++
	for {
		for ; i+16 <= len(b); i += 16 {
			s1 := special(binary.LittleEndian.Uint64(b[i:]))
			s2 := special(binary.LittleEndian.Uint64(b[i+8:]))
			if s1|s2 != 0 {
				if s1 != 0 {
					i += bits.TrailingZeros64(s1) >> 3
				} else {
					i += 8 + bits.TrailingZeros64(s2)>>3
				}
				goto found
			}
		}
		for ; i < len(b); i++ {
			if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
				goto found
			}
		}
		return i, escaped, scanEOF
	found:
		switch b[i] {
		case '"':
			return i + 1, escaped, scanOK
		case '\\':
			escaped = true
			if i, e = skipEscape(b, i); e != scanOK {
				return i, escaped, e
			}
		default:
			return i, escaped, scanControl
		}
	}
}

// skipEscape validates the escape sequence at b[i] == '\\' and returns the
// index after it. A \u escape of a UTF-16 surrogate must be a high one
// followed by a \u escape of a low one, as jsontext requires.
func skipEscape(b []byte, i int) (int, scanErr) {
	if i+1 >= len(b) {
		return i, scanEOF
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, scanOK
	case 'u':
	default:
		return i, scanEscape
	}
	r, e := scanHex(b, i)
	switch {
	case e != scanOK:
		return i, e
	case !utf16.IsSurrogate(r):
		return i + 6, scanOK
	}
	if r >= 0xdc00 { // a low surrogate first
		return i, scanEscape
	}
	if i+6 < len(b) && b[i+6] != '\\' || i+7 < len(b) && b[i+7] != 'u' {
		return i, scanEscape
	}
	r2, e := scanHex(b, i+6)
	switch {
	case e != scanOK:
		return i, e
	case utf16.DecodeRune(r, r2) == utf8.RuneError: // r2 is not a low surrogate
		return i, scanEscape
	}
	return i + 12, scanOK
}

// scanHex reads the four hex digits of the \u escape at b[i].
func scanHex(b []byte, i int) (rune, scanErr) {
	var r rune
	for k := i + 2; k < i+6; k++ {
		if k >= len(b) {
			return 0, scanEOF
		}
		c := b[k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, scanEscape
		}
		r = r<<4 | rune(c)
	}
	return r, scanOK
}

// scanLiteral validates the literal lit (true, false or null) at b[i].
func scanLiteral(b []byte, i int, lit string) (int, scanErr) {
	for k := range len(lit) {
		if i+k >= len(b) {
			return i + k, scanEOF
		}
		if b[i+k] != lit[k] {
			return i + k, scanChar
		}
	}
	return i + len(lit), scanOK
}

// scanNumber validates the number at b[i] (RFC 8259, section 6) and
// returns the index after it. What follows is the caller's to check.
func scanNumber(b []byte, i int) (int, scanErr) {
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, scanEOF
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i = skipDigits(b, i+1)
	default:
		return i, scanChar
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) {
			return i, scanEOF
		}
		if !isDigit(b[i]) {
			return i, scanChar
		}
		i = skipDigits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) {
			return i, scanEOF
		}
		if !isDigit(b[i]) {
			return i, scanChar
		}
		i = skipDigits(b, i+1)
	}
	return i, scanOK
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}
