package authserver

import (
	"context"
	"errors"
	"time"
)

// What the authorization server keeps, and the Store that keeps it: in
// memory with a state file for one replica (store_file.go), in Redis for
// several (store_redis.go). Secrets are never stored in clear: refresh
// tokens, authorization codes and client secrets are kept as their
// SHA-256 (Hash), so a stolen state file or Redis dump grants nothing.

// Errors of a Store.
var (
	// ErrNotFound: no such record, or it expired.
	ErrNotFound = errors.New("authserver: not found")
	// ErrReused: a refresh token or an authorization code was presented
	// a second time. The Store has already revoked the grant it belonged
	// to (RFC 9700 4.14.2, RFC 6749 4.1.2).
	ErrReused = errors.New("authserver: token reused")
	// ErrUnavailable: the Store could not be reached or could not keep
	// the change (Redis down, a state file that cannot be written). The
	// caller answers that it cannot serve now (503,
	// temporarily_unavailable), never that the record is unknown.
	ErrUnavailable = errors.New("authserver: store unavailable")
)

// Hash is the SHA-256 of a secret (a code, a refresh token, a client
// secret), the only form a Store keeps it in.
type Hash [32]byte

// Client is a registered OAuth client: by dynamic client registration
// (RFC 7591), from a client ID metadata document (its ID is the
// document's https URL), or configured.
type Client struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// URI is the client's home page (client_uri), shown on the consent
	// page next to its redirect host.
	URI          string   `json:"uri,omitempty"`
	RedirectURIs []string `json:"redirectUris"`
	// SecretHash is the hash of its secret; zero for a public client
	// (token_endpoint_auth_method "none", PKCE only).
	SecretHash Hash   `json:"secretHash,omitzero"`
	AuthMethod string `json:"authMethod"` // "none", "client_secret_post" or "client_secret_basic"
	// Document marks a client from a client ID metadata document: its
	// record is a cache, fetched again when Expires passes.
	Document  bool      `json:"document,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	Expires   time.Time `json:"expires,omitzero"`
}

// AuthRequest is an authorization request between /authorize and the
// code's redemption: created when a client sends a user to /authorize,
// signed in and consented to by the login pages, then turned into a code.
type AuthRequest struct {
	ID                  string    `json:"id"`
	ClientID            string    `json:"clientId"`
	RedirectURI         string    `json:"redirectUri"`
	State               string    `json:"state,omitempty"`
	Nonce               string    `json:"nonce,omitempty"`
	Scopes              []string  `json:"scopes"`
	ResponseType        string    `json:"responseType"`
	ResponseMode        string    `json:"responseMode,omitempty"`
	CodeChallenge       string    `json:"codeChallenge"`
	CodeChallengeMethod string    `json:"codeChallengeMethod"` // "S256" only
	Resource            string    `json:"resource"`            // RFC 8707: the one server or endpoint URL the token is for
	CreatedAt           time.Time `json:"createdAt"`
	// CSRF is the anti-forgery token the login and consent forms carry.
	CSRF string `json:"csrf"`
	// User is who signed in (empty until then); Consented is set when
	// they allowed the request, AuthTime when they signed in.
	User      string    `json:"user,omitempty"`
	AuthTime  time.Time `json:"authTime,omitzero"`
	Consented bool      `json:"consented,omitempty"`
}

// Grant is what a user allowed a client: a resource and scopes. Refresh
// tokens belong to a grant; revoking it (the admin page, RFC 7009, a
// reused refresh token) ends every token issued under it.
type Grant struct {
	ID        string    `json:"id"`
	User      string    `json:"user"`
	ClientID  string    `json:"clientId"`
	Resource  string    `json:"resource"`
	Scopes    []string  `json:"scopes"`
	CreatedAt time.Time `json:"createdAt"`
	// LastUsed is the last refresh (or the grant's creation).
	LastUsed time.Time `json:"lastUsed"`
	// Refresh is the hash of the grant's current refresh token, Expires
	// its expiry; Previous holds hashes of the tokens it replaced, so
	// that presenting one of them again is detected as reuse.
	Refresh  Hash      `json:"refresh"`
	Expires  time.Time `json:"expires"`
	Previous []Hash    `json:"previous,omitempty"`
}

// Passkey is a WebAuthn credential of a user, as go-webauthn stores it
// (Data is its JSON encoding of webauthn.Credential).
type Passkey struct {
	User      string    `json:"user"`
	ID        []byte    `json:"id"`
	Data      []byte    `json:"data"`
	CreatedAt time.Time `json:"createdAt"`
}

// Store keeps the authorization server's records. Every method is safe
// for concurrent use and bounded in time (a Redis Store by its client's
// timeout); a method that fails leaves the records as they were, except
// a revocation, which may hold although its call failed (a file Store
// that could not write it keeps it in memory: refusing more is the safe
// side). A Redis Store keeps a grant's Expires and LastUsed to the
// millisecond.
type Store interface {
	// PutClient adds or replaces a client.
	PutClient(ctx context.Context, c *Client) error
	// Client returns a client, or ErrNotFound.
	Client(ctx context.Context, id string) (*Client, error)
	// Clients lists every client.
	Clients(ctx context.Context) ([]*Client, error)
	// DeleteClient removes a client and revokes its grants.
	DeleteClient(ctx context.Context, id string) error

	// PutAuthRequest stores a request until ttl passes.
	PutAuthRequest(ctx context.Context, r *AuthRequest, ttl time.Duration) error
	// AuthRequest returns a request, or ErrNotFound (also past its ttl).
	AuthRequest(ctx context.Context, id string) (*AuthRequest, error)
	// DeleteAuthRequest removes a request (done or denied).
	DeleteAuthRequest(ctx context.Context, id string) error

	// PutCode stores a code's hash for the request it redeems, until ttl.
	PutCode(ctx context.Context, code Hash, requestID string, ttl time.Duration) error
	// TakeCode redeems a code once, atomically: it returns the request's
	// id and forgets the code. A code presented again returns ErrReused
	// (and the grant issued for it is revoked: record the grant with
	// CodeGrant); an unknown or expired code returns ErrNotFound.
	TakeCode(ctx context.Context, code Hash) (requestID string, err error)
	// CodeGrant records the grant issued for a code, so that a replay of
	// the code revokes it.
	CodeGrant(ctx context.Context, code Hash, grantID string) error

	// PutGrant adds or replaces a grant.
	PutGrant(ctx context.Context, g *Grant) error
	// Grant returns a grant, or ErrNotFound (also once revoked).
	Grant(ctx context.Context, id string) (*Grant, error)
	// Grants lists every grant.
	Grants(ctx context.Context) ([]*Grant, error)
	// RevokeGrant removes a grant: its refresh tokens stop working, and
	// its access tokens are refused (Revoked) until they expire.
	RevokeGrant(ctx context.Context, id string) error
	// Rotate redeems refresh token old for new, atomically: it returns
	// the grant with Refresh = next, the old hash moved to Previous and
	// Expires = expires. A hash in Previous returns ErrReused after
	// revoking the grant; an unknown or expired one ErrNotFound.
	Rotate(ctx context.Context, old, next Hash, expires time.Time) (*Grant, error)
	// Revoked reports whether grant id was revoked. It is on the path of
	// every request bearing one of our tokens, so it answers from memory
	// (a Redis Store keeps the set of revoked grants in memory, told of
	// new revocations by pub/sub).
	Revoked(id string) bool

	// Seed returns the store's own random 32-byte secret, made on the
	// first call and kept for good: the signing key when the gateway has
	// no key ring configured (a personal gateway), so that tokens survive
	// a restart.
	Seed(ctx context.Context) ([]byte, error)

	// PutPasskey adds a user's passkey; Passkeys lists a user's.
	PutPasskey(ctx context.Context, p *Passkey) error
	Passkeys(ctx context.Context, user string) ([]*Passkey, error)

	// Close stops what the Store runs in the background (a Redis Store's
	// revocation subscriber) and waits for it. The gateway calls it once,
	// after the Server has stopped serving.
	Close() error
}
