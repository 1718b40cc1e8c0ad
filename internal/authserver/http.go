package authserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strings"
)

// What the protocol endpoints share: their JSON answers and errors
// (RFC 6749 5.2), CORS for the endpoints a browser-based client calls,
// and the plain page /authorize shows when it cannot send the user agent
// back to the client.

// OAuth error codes (RFC 6749 4.1.2.1, 5.2; RFC 8707 invalid_target).
const (
	errInvalidRequest = "invalid_request"
	errInvalidClient  = "invalid_client"
	errInvalidGrant   = "invalid_grant"
	errInvalidScope   = "invalid_scope"
	errInvalidTarget  = "invalid_target"
	errServerError    = "server_error"
	// errUnavailable: the Store could not be reached (RFC 6749 4.1.2.1
	// names it for /authorize; the token, revocation and registration
	// endpoints answer it with 503, so a client retries rather than
	// dropping a registration or a token that still works).
	errUnavailable = "temporarily_unavailable"
)

// oauthError is an error answer of the token and revocation endpoints.
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// writeJSON answers v with status, never cached (RFC 6749 5.1).
func writeJSON(w http.ResponseWriter, status int, v any) {
	noStore(w)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers an OAuth error: 401 with a Basic challenge for a
// client that failed to authenticate by the header (RFC 6749 5.2), 500
// for ours, 503 with Retry-After while the Store is out of reach, else
// 400.
func writeError(w http.ResponseWriter, r *http.Request, code, description string) {
	status := http.StatusBadRequest
	switch code {
	case errInvalidClient:
		status = http.StatusUnauthorized
		if _, _, ok := r.BasicAuth(); ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="mcpgate"`)
		}
	case errServerError:
		status = http.StatusInternalServerError
	case errUnavailable:
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeJSON(w, status, oauthError{Code: code, Description: description})
}

// retryAfterSeconds is the Retry-After of an answer the Store's outage
// caused: Redis coming back, or a disk made writable, takes seconds.
const retryAfterSeconds = "5"

// storeErrorCode is the OAuth error for a failure of the Store: the
// Store out of reach is temporarily_unavailable, anything else ours.
func storeErrorCode(err error) string {
	if errors.Is(err, ErrUnavailable) {
		return errUnavailable
	}
	return errServerError
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

// cors opens h to scripts of every origin (browser-based MCP clients
// read the metadata, the keys, and call token and revoke): none of them
// acts on a cookie, so no origin gets more than any other.
func cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
			w.Header().Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// postOnly serves h for POST, and answers other methods (but OPTIONS,
// which cors answers) 405 with an OAuth error body.
func postOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeJSON(w, http.StatusMethodNotAllowed, oauthError{Code: errInvalidRequest, Description: "use POST"})
			return
		}
		h(w, r)
	})
}

// authorizePage is the page of an authorization request that cannot go
// back to its client: the client or its redirect URI is unknown.
func authorizePage(w http.ResponseWriter, status int, msg string) {
	noStore(w)
	securityHeaders(w) // as the login pages': no framing, no Referer, no sniffing
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sign-in refused</title></head><body><h1>Sign-in refused</h1><p>%s</p></body></html>`, html.EscapeString(msg))
}

// quote quotes a value a client chose, short, for an error description.
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return fmt.Sprintf("%q", strings.ToValidUTF8(s, "?"))
}
