package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// Config is what the gateway's config file says about authentication:
// gateway.auth, and the servers' and endpoints' "auth" keys. Each field
// is the config key of the same name (internal/config documents them);
// the gateway copies them over, this package being a leaf.
type Config struct {
	// Issuers are gateway.auth.oauth.issuers.
	Issuers []Issuer
	// Scopes are gateway.auth.oauth.scopes: the scopes a token (or an API
	// key without scopes of its own) needs, unless a target says
	// otherwise.
	Scopes []string
	// ResourceName is gateway.auth.oauth.resourceName.
	ResourceName string
	// APIKeys are gateway.auth.apiKeys.
	APIKeys []APIKey
	// Required is gateway.auth.required: targets without an entry in
	// Servers or Endpoints are protected.
	Required bool
	// Servers and Endpoints hold the "auth" key of each server and
	// endpoint that has one, by name.
	Servers, Endpoints map[string]TargetConfig
}

// Issuer is one trusted authorization server.
type Issuer struct {
	// Issuer is its issuer identifier, as the tokens' "iss" writes it.
	Issuer string
	// JWKSURL is its key set's URL; "" discovers it from the issuer's
	// metadata (RFC 8414, then OpenID Connect discovery).
	JWKSURL string
	// Audiences are accepted in its tokens' "aud" besides the target's
	// resource URL.
	Audiences []string
	// Algorithms are the JWS algorithms accepted from it, a subset of
	// [AllowedAlgorithms]; nil means all of those.
	Algorithms []string
	// Introspection checks its opaque tokens (nil: none). At most one
	// issuer has it: an opaque token does not say who issued it.
	Introspection *Introspection
	// Keys, when set, gives the issuer's verification keys in process,
	// and JWKSURL is not used: the gateway's own authorization server,
	// whose keys the gateway holds (an HTTP fetch to itself would cost a
	// round trip and could go through a proxy that is not there yet). It
	// is called for every token of the issuer, so it must be cheap.
	Keys func() []PublicKey
	// Revoked, when set, is asked about every token of the issuer whose
	// signature, times and audience passed, with its claims: true refuses
	// it (401 invalid_token). The gateway's own authorization server
	// answers from its revoked grants, so that a revoked grant's access
	// tokens stop at once rather than when they expire.
	Revoked func(claims map[string]any) bool
}

// PublicKey is a verification key an Issuer's Keys gives: its key id
// (the tokens' "kid"), the algorithm it is for ("" for whatever its type
// fits) and the key (*rsa.PublicKey, *ecdsa.PublicKey or
// ed25519.PublicKey).
type PublicKey struct {
	ID        string
	Algorithm string
	Key       any
}

// Introspection is an RFC 7662 introspection endpoint and the gateway's
// credentials for it (HTTP Basic; both empty for none).
type Introspection struct {
	URL, ClientID, ClientSecret string
}

// APIKey is one API key: its name, and the key as a SHA-256 in hex, or a
// file or environment variable to read it from (one of the three).
type APIKey struct {
	Name                    string
	SHA256, KeyFile, KeyEnv string
	Servers, Endpoints      []string // what it may use ("*": every one); both nil: everything
	Scopes                  []string // nil: Config.Scopes
}

// TargetConfig is a server's or endpoint's "auth" key: Off for false,
// else the target is protected, needing Scopes (nil: Config.Scopes).
type TargetConfig struct {
	Off    bool
	Scopes []string
}

// AllowedAlgorithms are the only JWS algorithms a token may be signed
// with: asymmetric ones. Never "none", never HS*: a shared secret lets
// whoever checks a token make one, and a public key used as an HMAC
// secret is the classic forgery.
var AllowedAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Options are the Gate's means and bounds; the zero value is ready.
type Options struct {
	// Client fetches metadata and key sets and calls introspection
	// endpoints. Default: a client of its own (proxy from the
	// environment, no redirect for introspection).
	Client *http.Client
	// Now is the clock (tests move it). Default time.Now.
	Now func() time.Time
	// Logger gets key set fetches and failures, never a token.
	Logger *slog.Logger
	// LookupEnv and ReadFile read API keys given by keyEnv and keyFile.
	// Default os.LookupEnv and os.ReadFile.
	LookupEnv func(string) (string, bool)
	ReadFile  func(string) ([]byte, error)
	// FetchTimeout bounds one metadata, key set or introspection
	// request. Default 10s.
	FetchTimeout time.Duration
	// KeySetMaxAge is how long a key set is used before it is fetched
	// again. Default 1h.
	KeySetMaxAge time.Duration
	// KeySetMinInterval is the least time between two fetches of a key
	// set for tokens naming a key it lacks (a rotation), so that tokens
	// with made-up key ids cannot make the gateway hammer the issuer.
	// Default 30s.
	KeySetMinInterval time.Duration
	// KeySetRetry is the least time between a fetch that failed and the
	// next. Default 5s.
	KeySetRetry time.Duration
	// CacheSize bounds the introspection results kept. Default 10000.
	CacheSize int
}

// ExpiryLeeway is the clock skew allowed on a token's exp and nbf: a
// token is accepted up to this long after it expired. Whoever must refuse
// a token until it can no longer be accepted (a revoked grant's) counts
// it in.
const ExpiryLeeway = 60 * time.Second

// Bounds and defaults.
const (
	// leeway is the clock skew allowed on exp and nbf.
	leeway = ExpiryLeeway
	// introspectionTTL is the longest an introspection result is reused:
	// a revoked token works at most this long after.
	introspectionTTL = 60 * time.Second
	// maxDocumentBytes bounds a metadata, key set or introspection reply.
	maxDocumentBytes = 1 << 20
	// minKeyLength is the shortest API key read from a file or variable.
	minKeyLength = 16
	// maxTokenLength bounds a bearer token: a JWT with many claims is a
	// few KiB.
	maxTokenLength = 16 << 10
)

// Gate is the Authenticator of a Config. It starts no goroutine: key sets
// are fetched, and opaque tokens introspected, by the request that needs
// them (others wait for that one), within FetchTimeout.
type Gate struct {
	required          bool
	scopes            []string
	resourceName      string
	servers           map[string]TargetConfig
	endpoints         map[string]TargetConfig
	keys              []apiKey
	issuers           []*issuer
	byID              map[string]*issuer
	issuerIDs         []string
	introspector      *issuer
	algorithms        []string // every issuer's, for the parser
	now               func() time.Time
	log               *slog.Logger
	client            *http.Client
	ownClient         bool
	fetchTimeout      time.Duration
	keySetMaxAge      time.Duration
	keySetMinInterval time.Duration
	keySetRetry       time.Duration
	cache             *tokenCache
}

var _ Authenticator = (*Gate)(nil)

// issuer is one trusted authorization server at run time.
type issuer struct {
	id            string
	audiences     []string
	algorithms    []string
	keys          *keySet
	local         func() []PublicKey // Issuer.Keys
	revoked       func(map[string]any) bool
	introspection *Introspection
}

// New returns the Gate of cfg. It reads the API keys given by file or
// environment variable (and keeps only their hashes), and checks what the
// config package checks too, for a Config built in code: it never accepts
// an algorithm outside [AllowedAlgorithms]. It fetches nothing: an
// issuer's keys are fetched when its first token comes, so that an
// authorization server that is down does not stop the gateway.
func New(cfg Config, opts Options) (*Gate, error) {
	g := &Gate{
		required:          cfg.Required,
		scopes:            slices.Clone(cfg.Scopes),
		resourceName:      cfg.ResourceName,
		servers:           cfg.Servers,
		endpoints:         cfg.Endpoints,
		byID:              map[string]*issuer{},
		now:               opts.Now,
		log:               opts.Logger,
		client:            opts.Client,
		fetchTimeout:      opts.FetchTimeout,
		keySetMaxAge:      opts.KeySetMaxAge,
		keySetMinInterval: opts.KeySetMinInterval,
		keySetRetry:       opts.KeySetRetry,
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.fetchTimeout <= 0 {
		g.fetchTimeout = 10 * time.Second
	}
	if g.keySetMaxAge <= 0 {
		g.keySetMaxAge = time.Hour
	}
	if g.keySetMinInterval <= 0 {
		g.keySetMinInterval = 30 * time.Second
	}
	if g.keySetRetry <= 0 {
		g.keySetRetry = 5 * time.Second
	}
	size := opts.CacheSize
	if size <= 0 {
		size = 10000
	}
	g.cache = newTokenCache(size)
	if g.client == nil {
		g.client = newClient(g.fetchTimeout)
		g.ownClient = true
	}
	var errs []error
	for i, c := range cfg.Issuers {
		is, err := g.newIssuer(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("issuer %d (%q): %w", i, c.Issuer, err))
			continue
		}
		if _, dup := g.byID[is.id]; dup {
			errs = append(errs, fmt.Errorf("issuer %q is listed twice", is.id))
			continue
		}
		if is.introspection != nil {
			if g.introspector != nil {
				errs = append(errs, fmt.Errorf("issuers %q and %q both have introspection: an opaque token does not say which made it", g.introspector.id, is.id))
				continue
			}
			g.introspector = is
		}
		g.issuers = append(g.issuers, is)
		g.byID[is.id] = is
		g.issuerIDs = append(g.issuerIDs, is.id)
		for _, alg := range is.algorithms {
			if !slices.Contains(g.algorithms, alg) {
				g.algorithms = append(g.algorithms, alg)
			}
		}
	}
	lookupEnv, readFile := opts.LookupEnv, opts.ReadFile
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]string{}
	for _, c := range cfg.APIKeys {
		k, err := newAPIKey(c, cfg.Scopes, lookupEnv, readFile)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if names[k.name] {
			errs = append(errs, fmt.Errorf("API key name %q is used twice", k.name))
			continue
		}
		if other, dup := hashes[k.hash]; dup {
			errs = append(errs, fmt.Errorf("API keys %q and %q are the same key", other, k.name))
			continue
		}
		names[k.name] = true
		hashes[k.hash] = k.name
		g.keys = append(g.keys, k)
	}
	if len(errs) > 0 {
		if g.ownClient {
			g.client.CloseIdleConnections()
		}
		return nil, fmt.Errorf("auth: %w", errors.Join(errs...))
	}
	return g, nil
}

// newIssuer checks one issuer's settings.
func (g *Gate) newIssuer(c Issuer) (*issuer, error) {
	if c.Issuer == "" {
		return nil, errors.New("no issuer identifier")
	}
	algs := c.Algorithms
	if algs == nil {
		algs = AllowedAlgorithms
	}
	if len(algs) == 0 {
		return nil, errors.New("no algorithm accepted")
	}
	for _, alg := range algs {
		if !slices.Contains(AllowedAlgorithms, alg) {
			return nil, fmt.Errorf("algorithm %q is not one of %s", alg, strings.Join(AllowedAlgorithms, ", "))
		}
	}
	if in := c.Introspection; in != nil && in.URL == "" {
		return nil, errors.New("introspection without a URL")
	}
	is := &issuer{id: c.Issuer, algorithms: slices.Clone(algs), introspection: c.Introspection, local: c.Keys, revoked: c.Revoked}
	for _, a := range c.Audiences {
		is.audiences = append(is.audiences, canonicalResource(a))
	}
	is.keys = &keySet{g: g, issuer: c.Issuer, url: c.JWKSURL}
	return is, nil
}

// Close releases the idle connections of the Gate's own HTTP client.
// Authenticate may still be called after it.
func (g *Gate) Close() {
	if g.ownClient {
		g.client.CloseIdleConnections()
	}
}

// policy returns whether target t is protected, and the scopes its
// requests need.
func (g *Gate) policy(t Target) (bool, []string) {
	var (
		tc  TargetConfig
		set bool
	)
	switch t.Kind {
	case "server":
		tc, set = g.servers[t.Name]
	case "endpoint":
		tc, set = g.endpoints[t.Name]
	}
	switch {
	case !set:
		return g.required, g.scopes
	case tc.Off:
		return false, nil
	case tc.Scopes != nil:
		return true, tc.Scopes
	}
	return true, g.scopes
}

// failure is a refusal on its way to a Decision.
type failure struct {
	status int    // 401, 403 or 503
	code   string // RFC 6750 error code ("invalid_token", "insufficient_scope"), or ""
	reason string
	retry  time.Duration
}

// invalid is a 401 invalid_token refusal.
func invalid(format string, args ...any) *failure {
	return &failure{status: http.StatusUnauthorized, code: "invalid_token", reason: "invalid token: " + fmt.Sprintf(format, args...)}
}

// unavailable is a 503: the credentials cannot be checked now.
func unavailable(retry time.Duration, format string, args ...any) *failure {
	return &failure{status: http.StatusServiceUnavailable, reason: "cannot check the token now: " + fmt.Sprintf(format, args...), retry: retry}
}

// Authenticate implements [Authenticator].
func (g *Gate) Authenticate(r *http.Request, t Target) Decision {
	protected, scopes := g.policy(t)
	metadata := ""
	if protected {
		metadata = t.Metadata
	}
	token, st := bearerToken(r.Header)
	switch st {
	case tokenNone, tokenOtherScheme:
		if !protected {
			return Decision{}
		}
		reason := "no credentials (send Authorization: Bearer TOKEN)"
		if st == tokenOtherScheme {
			reason = "the Authorization header is not of the Bearer scheme"
		}
		// RFC 6750 section 3.1: no error code when no credentials came.
		return Decision{Status: http.StatusUnauthorized, Challenge: challenge("", metadata, scopes, ""), Reason: reason}
	case tokenMultiple, tokenMalformed:
		reason := "more than one Authorization header"
		if st == tokenMalformed {
			reason = "malformed bearer token (RFC 6750: letters, digits, - . _ ~ + / and trailing =)"
		}
		return Decision{Status: http.StatusBadRequest, Challenge: challenge("invalid_request", metadata, scopes, reason), Reason: reason}
	}
	p, f := g.principal(r.Context(), token, t)
	if f == nil {
		if missing := missingScopes(p.Scopes, scopes); len(missing) > 0 {
			who := "the token lacks"
			if p.Kind == KindKey {
				who = fmt.Sprintf("API key %q lacks", p.Name)
			}
			f = &failure{status: http.StatusForbidden, code: "insufficient_scope",
				reason: fmt.Sprintf("insufficient scope: %s %s", who, strings.Join(missing, " "))}
		}
	}
	if f != nil {
		d := Decision{Status: f.status, Reason: f.reason, RetryAfter: f.retry}
		if f.status == http.StatusForbidden {
			d.Refused = p // who was refused, for the audit log
		}
		if f.status != http.StatusServiceUnavailable {
			d.Challenge = challenge(f.code, metadata, scopes, f.reason)
		}
		return d
	}
	return Decision{Principal: p}
}

// principal finds who token is, or why it is refused for target t (with
// who it is, when known, for a 403). API
// keys come first: they are the cheapest check, and a key must never be
// sent to an issuer's introspection endpoint.
func (g *Gate) principal(ctx context.Context, token string, t Target) (*Principal, *failure) {
	if k := g.matchKey(token); k != nil {
		if !k.allows(t) {
			// The key is good, and its holder known: 403 says it is
			// this key's rights, where a 401 would invite a client to
			// try the same key again or start an OAuth flow.
			return &Principal{Name: k.name, Kind: KindKey}, &failure{status: http.StatusForbidden, code: "insufficient_scope",
				reason: fmt.Sprintf("API key %q may not use %s %q", k.name, t.Kind, t.Name)}
		}
		return &Principal{Name: k.name, Kind: KindKey, Scopes: slices.Clone(k.scopes)}, nil
	}
	if len(g.issuers) > 0 && isJWT(token) {
		return g.checkJWT(ctx, token, t)
	}
	if g.introspector != nil {
		return g.introspect(ctx, token, t)
	}
	switch {
	case len(g.issuers) == 0:
		return nil, invalid("not an API key of this gateway")
	case len(g.keys) == 0:
		return nil, invalid("not a JWT, and no issuer has introspection for opaque tokens")
	}
	return nil, invalid("not an API key of this gateway, nor a JWT (no issuer has introspection for opaque tokens)")
}

// missingScopes returns the scopes of need that have lacks.
func missingScopes(have, need []string) []string {
	var missing []string
	for _, s := range need {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	return missing
}
