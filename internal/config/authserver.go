package config

import "time"

// AuthServer is the "gateway.auth.server" block: the gateway's own OAuth
// 2.1 authorization server, for a personal gateway that Claude's
// connectors (which authenticate with OAuth only) reach without a
// separate identity provider. Off (nil) unless configured. When on, the
// gateway trusts the tokens it issues like any issuer's (it is added to
// gateway.auth.oauth's issuers) and names it in every protected
// resource's metadata. internal/authserver implements it.
type AuthServer struct {
	// Issuer is its issuer identifier and public base URL (key
	// "issuer"): https (http only on a loopback host), no query or
	// fragment. Default gateway.auth.publicUrl; one of the two is
	// required, since behind a proxy the request's Host is the client's
	// to choose.
	Issuer string

	// Users are the people who may sign in (key "users"). Default none:
	// then the first sign-in uses a one-time code printed in the log.
	Users []AuthUser

	// SignInCode prints a one-time sign-in code in the log at start
	// (key "signInCode"), good for one sign-in. Default: true when Users
	// is empty, false otherwise.
	SignInCode bool

	// RedirectURIs are the redirect URIs a registered client may use
	// (key "redirectUris"): exact URLs, or patterns with "*" standing for
	// one host label or one port. Loopback redirect URIs
	// (http://127.0.0.1, http://[::1], http://localhost, any port, as
	// RFC 8252 asks) are always allowed for local clients unless
	// loopbackRedirects is false. Default DefaultRedirectURIs.
	RedirectURIs []string

	// LoopbackRedirects allows loopback redirect URIs on any port (key
	// "loopbackRedirects"). Default true.
	LoopbackRedirects bool

	// Registration serves dynamic client registration (RFC 7591) (key
	// "registration"). Default true.
	Registration bool

	// ClientMetadataDocuments accepts client ids that are https URLs of
	// client metadata documents (key "clientMetadataDocuments"). Default
	// true.
	ClientMetadataDocuments bool

	// Scopes are the scopes clients may ask for (key "scopes"); a request
	// that asks for none gets all of them. Default
	// gateway.auth.oauth.scopes, or ["mcp"] when that is empty.
	Scopes []string

	// AccessTokenTTL is an access token's life (key "accessTokenTtl").
	// Default 10 minutes.
	AccessTokenTTL time.Duration

	// RefreshTokenTTL is a refresh token's life when unused (key
	// "refreshTokenTtl"); each refresh issues a new one. Default 30 days.
	RefreshTokenTTL time.Duration

	// StateFile is where clients, grants and passkeys are kept across
	// restarts (key "stateFile"), relative to the config file. Default
	// "mcpgate-auth.json" next to the config file. With gateway.cluster's
	// Redis they are kept in Redis instead and the file is not used.
	StateFile string

	// Passkeys lets users add passkeys (WebAuthn) and sign in with them
	// (key "passkeys"). Default true.
	Passkeys bool
}

// AuthUser is one entry of "gateway.auth.server.users".
type AuthUser struct {
	// Name is what the user types to sign in (key "name"), required and
	// unique: letters, digits, '.', '_', '-' and '@'.
	Name string
	// PasswordHash is the password's argon2id (PHC string, "$argon2id$")
	// or bcrypt ("$2a$", "$2b$", "$2y$") hash (key "passwordHash"), as
	// `mcpgate passwd` prints it. It expands ${VAR}. Empty: the user
	// signs in with a passkey only.
	PasswordHash string
}

// DefaultRedirectURIs are the redirect URIs of Claude's connectors, which
// a registered client may use unless gateway.auth.server.redirectUris
// says otherwise.
var DefaultRedirectURIs = []string{
	"https://claude.ai/api/mcp/auth_callback",
	"https://claude.com/api/mcp/auth_callback",
}

// NewAuthServer returns an authorization server block with every setting
// at its default (those that depend on other keys are filled by Defaults).
func NewAuthServer() *AuthServer {
	return &AuthServer{
		LoopbackRedirects:       true,
		Registration:            true,
		ClientMetadataDocuments: true,
		AccessTokenTTL:          10 * time.Minute,
		RefreshTokenTTL:         30 * 24 * time.Hour,
		Passkeys:                true,
	}
}

// DefaultStateFile is the authorization server's state file, next to the
// config file, unless gateway.auth.server.stateFile says otherwise.
const DefaultStateFile = "mcpgate-auth.json"
