package eras

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The base64 sentinel form of Mcp-Name and Mcp-Param-* values
// (streamable-http.mdx, "Request Metadata"): =?base64?{B64(UTF-8)}?=, with
// the markers exact and case-sensitive.
const (
	b64Prefix = "=?base64?"
	b64Suffix = "?="
)

// ErrHeaderEncoding is wrapped by the errors of [DecodeHeaderValue].
var ErrHeaderEncoding = errors.New("modern: invalid =?base64?...?= header value")

// DecodeHeaderValue returns the value an Mcp-Name or Mcp-Param-* header
// stands for. A value in the sentinel form =?base64?…?= is decoded (standard
// alphabet, padding required, as the spec's examples have it); any other
// value is returned as it is. A sentinel whose content is not valid base64,
// or does not decode to UTF-8, is an error wrapping [ErrHeaderEncoding]: the
// body it must match is always UTF-8, and the spec has servers reject such
// headers rather than guess.
func DecodeHeaderValue(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, b64Prefix)
	if ok {
		inner, ok = strings.CutSuffix(inner, b64Suffix)
	}
	if !ok {
		return v, nil
	}
	d, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrHeaderEncoding, err)
	}
	if !utf8.Valid(d) {
		return "", fmt.Errorf("%w: decodes to invalid UTF-8", ErrHeaderEncoding)
	}
	return string(d), nil
}

// EncodeHeaderValue returns s as a client must write it in an Mcp-Name or
// Mcp-Param-* header: as it is when it is plain header-safe ASCII (0x21-0x7E,
// space and tab, but no leading or trailing space or tab), in the base64
// sentinel form otherwise, and also when s itself looks like a sentinel.
// DecodeHeaderValue(EncodeHeaderValue(s)) is s for any valid UTF-8 s.
func EncodeHeaderValue(s string) string {
	if plainHeaderValue(s) {
		return s
	}
	return b64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + b64Suffix
}

func plainHeaderValue(s string) bool {
	if s == "" {
		return true
	}
	if isBlank(s[0]) || isBlank(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x21 || c > 0x7e) && !isBlank(c) {
			return false
		}
	}
	return !(strings.HasPrefix(s, b64Prefix) && strings.HasSuffix(s, b64Suffix))
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }
