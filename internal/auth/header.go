package auth

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// tokenStatus is what bearerToken found.
type tokenStatus int

const (
	tokenOK          tokenStatus = iota
	tokenNone                    // no Authorization header
	tokenOtherScheme             // Basic, Digest, ...: no bearer credentials
	tokenMultiple                // several Authorization headers: which one counts is unclear
	tokenMalformed               // Bearer with an empty, overlong or ill-formed token
)

// bearerToken returns the token of the request's Authorization header
// (RFC 6750 section 2.1: "Bearer" in any case, one or more spaces, a
// b64token). Tokens in the query or the body are not looked for: MCP
// forbids them, and they end up in logs.
func bearerToken(h http.Header) (string, tokenStatus) {
	values := h.Values("Authorization")
	switch len(values) {
	case 0:
		return "", tokenNone
	case 1:
	default:
		return "", tokenMultiple
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", tokenNone
	}
	scheme, rest, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", tokenOtherScheme
	}
	token := strings.TrimLeft(rest, " ")
	if token == "" {
		// "Bearer" alone: a client with no token yet, which needs the
		// challenge to go and get one.
		return "", tokenNone
	}
	if len(token) > maxTokenLength || !isB64Token(token) {
		return "", tokenMalformed
	}
	return token, tokenOK
}

// isB64Token reports whether s is an RFC 6750 b64token: 1*( ALPHA /
// DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// isJWT reports whether token is a JWS in compact form: three base64url
// parts whose first is a JSON object with "alg". Anything else (an
// opaque token, even one with two dots; a JWE of five parts) is opaque.
func isJWT(token string) bool {
	if strings.Count(token, ".") != 2 {
		return false
	}
	head, _, _ := strings.Cut(token, ".")
	if len(head) > 4096 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h map[string]any
	if json.Unmarshal(raw, &h) != nil {
		return false
	}
	_, ok := h["alg"]
	return ok
}
