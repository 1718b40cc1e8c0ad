package config

// Auth is the "gateway.auth" block: the credentials clients must present.
// Without it (nil, the default) nobody is asked for any. internal/auth
// checks them; this is only their description.
type Auth struct {
	// OAuth trusts the access tokens of OAuth 2.1 authorization servers
	// (key "oauth"): the gateway is their resource server, one protected
	// resource per server and endpoint URL (RFC 9728). Nil: none.
	OAuth *OAuth

	// Server is the gateway's own authorization server (key "server").
	// Nil: none.
	Server *AuthServer

	// APIKeys are static bearer keys (key "apiKeys"), for clients that
	// send a header of their own (Claude Code, SDK agents, CI). Default
	// none.
	APIKeys []APIKey

	// PublicURL is the gateway's URL as clients reach it (key
	// "publicUrl"): scheme, host and the path a proxy serves it under,
	// if any ("https://gw.example.com", "https://example.com/mcpgate").
	// The resource URL a token's audience must name is built from it;
	// without it, from the request's scheme and Host (the proxy's with
	// trustProxyHeaders), which a client chooses. Default "".
	PublicURL string

	// Required protects every server and endpoint whose own "auth" is
	// not false (key "required"). false protects only those whose "auth"
	// is true or an object. Default true.
	Required bool
}

// OAuth is the "gateway.auth.oauth" block.
type OAuth struct {
	// Issuers are the trusted authorization servers (key "issuers"), at
	// least one. A JWT is checked against the one its "iss" names; an
	// opaque token is sent to the one with introspection.
	Issuers []Issuer

	// Scopes are the scopes a token must carry (key "scopes"), unless a
	// server's or endpoint's "auth" says otherwise; the 401 challenge and
	// the metadata document name them so that clients ask for them. An
	// API key without its own "scopes" has these. Default none.
	Scopes []string

	// ResourceName is the human-readable name of the resources in their
	// metadata documents (key "resourceName", RFC 9728 resource_name),
	// which a client may show when it asks for consent. Default "".
	ResourceName string
}

// Issuer is one entry of "gateway.auth.oauth.issuers": an authorization
// server whose tokens are accepted.
type Issuer struct {
	// Issuer is its issuer identifier (key "issuer"), required: an https
	// URL (http only on a loopback host) without query or fragment,
	// exactly as the tokens' "iss" and its metadata's "issuer" write it.
	Issuer string

	// JWKSURL is the URL of its JSON Web Key Set (key "jwksUrl"). Default:
	// the jwks_uri of its metadata (RFC 8414, or OpenID Connect
	// discovery), fetched when its first JWT comes.
	JWKSURL string

	// Audiences are more audiences accepted in its tokens besides the
	// resource URL of the server or endpoint (key "audiences"): for an
	// authorization server that does not put the RFC 8707 resource in
	// "aud" (a Keycloak audience mapper, an Auth0 API identifier).
	// Default none.
	Audiences []string

	// Algorithms are the JWS algorithms accepted in its tokens (key
	// "algorithms"), from [AllowedAlgorithms]. Default: all of those.
	Algorithms []string

	// Introspection checks its opaque tokens (key "introspection"). Nil:
	// only JWTs.
	Introspection *Introspection
}

// Introspection is an issuer's "introspection" block: its RFC 7662 token
// introspection endpoint, for tokens that are not JWTs.
type Introspection struct {
	// URL is the endpoint (key "url"), required: https, or http on a
	// loopback host.
	URL string
	// ClientID and ClientSecret authenticate the gateway to it (keys
	// "clientId", "clientSecret"; HTTP Basic), both or neither. The
	// secret expands ${VAR}.
	ClientID, ClientSecret string
}

// APIKey is one entry of "gateway.auth.apiKeys". The key itself is never
// in the config: only its SHA-256, or where to read it.
type APIKey struct {
	// Name names the principal the key authenticates (key "name"),
	// required and unique: letters, digits, '.', '_' and '-'.
	Name string

	// SHA256 is the hex SHA-256 of the key (key "sha256"), as
	// `printf %s KEY | sha256sum` prints it. One of SHA256, KeyFile and
	// KeyEnv is required.
	SHA256 string
	// KeyFile is a file holding the key (key "keyFile"; surrounding
	// white space is ignored), read when the gateway starts.
	KeyFile string
	// KeyEnv is an environment variable holding the key (key "keyEnv").
	KeyEnv string

	// Servers and Endpoints name what the key may use (keys "servers" and
	// "endpoints"; "*" for every one). With neither set, everything; with
	// one set, only what it lists: a key for server "memory" does not
	// open an endpoint merging it with others.
	Servers, Endpoints []string

	// Scopes are the key's scopes (key "scopes"), checked like a token's
	// against what a server or endpoint requires. Nil: oauth.scopes.
	Scopes []string
}

// TargetAuth is a server's or endpoint's "auth" key: false leaves it open
// (requests without credentials pass), true protects it even when
// gateway.auth.required is false, and an object protects it with scopes
// of its own: {"scopes": ["mcp", "admin"]}.
type TargetAuth struct {
	// Off is "auth": false.
	Off bool
	// Scopes replace oauth.scopes here (key "scopes"; [] requires none).
	// Nil: oauth.scopes.
	Scopes []string
}

// AllowedAlgorithms are the JWS algorithms a token may be signed with:
// the asymmetric ones. "none" is never accepted, nor HS256/HS384/HS512:
// a shared secret would let anyone who can check a token also make one,
// and a public key taken for an HMAC secret is the classic forgery.
var AllowedAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// NewAuth returns an auth block with every setting at its default.
func NewAuth() *Auth { return &Auth{Required: true} }
