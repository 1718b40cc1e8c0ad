// Package auth decides who a request is from: an OAuth 2.1 access token
// (a JWT checked against its issuer's JWKS, or an opaque token checked by
// RFC 7662 introspection) or an API key of the config, for the protected
// resource a server's or an endpoint's URL is (RFC 9728). It answers with
// a Principal or with the challenge a client needs to get a token
// (WWW-Authenticate with resource_metadata and scope).
//
// The package is a leaf: it imports no other package of the gateway. The
// HTTP front (front) calls Authenticate before anything else of a
// request and serves the metadata documents; the gateway builds it from
// the config.
package auth

import (
	"net/http"
	"time"
)

// Principal is who a request is from.
type Principal struct {
	// Name identifies the principal: an API key's name, or the token's
	// subject ("sub"; its "client_id" when it has none), prefixed by its
	// issuer and "#" when several are trusted
	// ("https://as.example.com#alice"; an issuer has no fragment, so the
	// first "#" ends it).
	Name string
	// Kind is "key" or "token" (KindKey, KindToken).
	Kind string
	// Scopes are the token's scopes (an API key's, as configured).
	Scopes []string
	// Claims are the token's claims, or the introspection response's
	// members (nil for an API key), as JSON decodes them (numbers are
	// float64). Read-only: an introspection result serves every request
	// with its token while it is cached.
	Claims map[string]any
	// Issuer is the token's issuer ("" for an API key).
	Issuer string
	// Expiry is when the token expires (zero for an API key, and for an
	// introspected token whose response gives no "exp").
	Expiry time.Time
}

// Principal kinds.
const (
	KindKey   = "key"
	KindToken = "token"
)

// Target is the protected resource a request is for.
type Target struct {
	// Kind is "server" or "endpoint".
	Kind string
	// Name is the server's or endpoint's name.
	Name string
	// Resource is the resource's canonical URL (scheme, host and path of
	// its /mcp URL, as the client must name it in its token request and
	// the token's audience must be): built by the front from the request,
	// honouring trusted proxy headers.
	Resource string
	// Aliases are other URLs of the same resource that a token's audience
	// may name instead of Resource: its legacy /sse URL, the resource
	// that the TypeScript SDK's SSE client (Claude Code, mcp-remote, the
	// Inspector) asks a token for, since it checks that the metadata's
	// resource is the URL it connects to or a parent of it.
	Aliases []string
	// Metadata is the absolute URL of the resource's RFC 9728 metadata
	// document (the path-inserted form).
	Metadata string
}

// Decision is the outcome of authenticating one request.
type Decision struct {
	// Principal is set when the request may go on as someone; a request
	// to a target that is not protected and that names nobody goes on
	// with none (Status 0, Principal nil).
	Principal *Principal
	// Status is 0 when it may go on, else 401 (no or bad credentials),
	// 403 (insufficient scope, or an API key for another target), 400 (a
	// malformed Authorization header) or 503 (the credentials cannot be
	// checked now: an issuer's keys or its introspection endpoint are out
	// of reach).
	Status int
	// Challenge is the WWW-Authenticate header value of a refusal (none
	// for 503).
	Challenge string
	// Reason says why, for the JSON-RPC error body and the log (never the
	// token itself).
	Reason string
	// RetryAfter is, with 503, when to try again.
	RetryAfter time.Duration
	// Refused is, with a 403, who was refused when known (an API key
	// without the rights to the target, a token without the scopes): for
	// the audit log only; the request does not go on as anyone.
	Refused *Principal
}

// Authenticator is what the HTTP front asks.
type Authenticator interface {
	// Authenticate decides request r to target. It must not block for
	// long: token introspection and JWKS fetches are cached and bounded.
	// A target that is not protected passes requests without credentials
	// (as nobody); credentials sent to it are checked as anywhere, so
	// that a request that names someone is from them.
	Authenticate(r *http.Request, target Target) Decision
	// Metadata returns the RFC 9728 protected resource metadata document
	// of target (JSON), and whether target is protected at all.
	Metadata(target Target) ([]byte, bool)
}
