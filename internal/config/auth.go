package config

import (
	"encoding/hex"
	"encoding/json"
	"net"
	"net/url"
	"slices"
	"strings"
)

// Auth is the "gateway.auth" block: the credentials clients must present.
// Without it (nil, the default) nobody is asked for any. internal/auth
// checks them; this is only their description.
type Auth struct {
	// OAuth trusts the access tokens of OAuth 2.1 authorization servers
	// (key "oauth"): the gateway is their resource server, one protected
	// resource per server and endpoint URL (RFC 9728). Nil: none.
	OAuth *OAuth

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

// auth decodes the "gateway.auth" block.
func (d *decoder) auth(path string, raw json.RawMessage, dst **Auth) {
	a := NewAuth()
	if !d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "oauth":
			d.oauth(p, v, &a.OAuth)
		case "apiKeys":
			d.apiKeys(p, v, &a.APIKeys)
		case "publicUrl":
			d.str(p, v, &a.PublicURL, true)
		case "required":
			d.boolean(p, v, &a.Required)
		default:
			return false
		}
		return true
	}) {
		return
	}
	*dst = a
}

// oauth decodes "gateway.auth.oauth".
func (d *decoder) oauth(path string, raw json.RawMessage, dst **OAuth) {
	o := &OAuth{}
	if !d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "issuers":
			elems, ok := array(v)
			if !ok {
				d.problems.add(p, `must be an array of objects like {"issuer": "https://auth.example.com"}`)
				return true
			}
			o.Issuers = make([]Issuer, 0, len(elems))
			for i, e := range elems {
				if is, ok := d.issuer(index(p, i), e); ok {
					o.Issuers = append(o.Issuers, is)
				}
			}
		case "scopes":
			d.strs(p, v, &o.Scopes, false)
		case "resourceName":
			d.str(p, v, &o.ResourceName, false)
		default:
			return false
		}
		return true
	}) {
		return
	}
	*dst = o
}

// issuer decodes one entry of "issuers".
func (d *decoder) issuer(path string, raw json.RawMessage) (Issuer, bool) {
	var is Issuer
	ok := d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "issuer":
			d.str(p, v, &is.Issuer, true)
		case "jwksUrl":
			d.str(p, v, &is.JWKSURL, true)
		case "audiences":
			d.strs(p, v, &is.Audiences, true)
		case "algorithms":
			d.strs(p, v, &is.Algorithms, false)
		case "introspection":
			in := &Introspection{}
			if d.fields(p, v, "an object", func(key, p string, v json.RawMessage) bool {
				switch key {
				case "url":
					d.str(p, v, &in.URL, true)
				case "clientId":
					d.str(p, v, &in.ClientID, true)
				case "clientSecret":
					d.str(p, v, &in.ClientSecret, true)
				default:
					return false
				}
				return true
			}) {
				is.Introspection = in
			}
		default:
			return false
		}
		return true
	})
	if is.Algorithms == nil {
		is.Algorithms = slices.Clone(AllowedAlgorithms)
	}
	return is, ok
}

// apiKeys decodes "gateway.auth.apiKeys".
func (d *decoder) apiKeys(path string, raw json.RawMessage, dst *[]APIKey) {
	elems, ok := array(raw)
	if !ok {
		d.problems.add(path, `must be an array of objects like {"name": "ci", "sha256": "..."}`)
		return
	}
	keys := make([]APIKey, 0, len(elems))
	for i, e := range elems {
		var k APIKey
		if d.fields(index(path, i), e, "an object", func(key, p string, v json.RawMessage) bool {
			switch key {
			case "name":
				d.str(p, v, &k.Name, false)
			case "sha256":
				d.str(p, v, &k.SHA256, false)
			case "keyFile":
				d.str(p, v, &k.KeyFile, true)
			case "keyEnv":
				if d.str(p, v, &k.KeyEnv, false) && validEnvName(k.KeyEnv) {
					// Checked here, where the environment is known, as
					// ${VAR} is: the gateway reads it again at start.
					if val, ok := d.lookupEnv(k.KeyEnv); !ok {
						d.problems.add(p, "environment variable %q is not set", k.KeyEnv)
					} else if strings.TrimSpace(val) == "" {
						d.problems.add(p, "environment variable %q is empty", k.KeyEnv)
					}
				}
			case "servers":
				d.strs(p, v, &k.Servers, false)
			case "endpoints":
				d.strs(p, v, &k.Endpoints, false)
			case "scopes":
				d.strs(p, v, &k.Scopes, false)
			default:
				return false
			}
			return true
		}) {
			keys = append(keys, k)
		}
	}
	*dst = keys
}

// targetAuth decodes a server's or endpoint's "auth": true, false or
// {"scopes": [...]}.
func (d *decoder) targetAuth(path string, raw json.RawMessage, dst **TargetAuth) {
	switch trimSpace(raw) {
	case "false":
		*dst = &TargetAuth{Off: true}
		return
	case "true":
		*dst = &TargetAuth{}
		return
	}
	t := &TargetAuth{}
	if d.fields(path, raw, `true, false or an object like {"scopes": ["mcp"]}`, func(key, p string, v json.RawMessage) bool {
		if key != "scopes" {
			return false
		}
		d.strs(p, v, &t.Scopes, false)
		return true
	}) {
		*dst = t
	}
}

// checkAuth records problems with the auth block and the servers' and
// endpoints' "auth" keys.
func (c *Config) checkAuth(ps *Problems) {
	a := c.Gateway.Auth
	if a == nil {
		for _, name := range c.Names() {
			if s := c.Servers[name]; s != nil && s.Auth != nil && !s.Auth.Off {
				ps.add(join(join("mcpServers", name), "auth"), `no credentials are configured to check: add "gateway": {"auth": {...}}`)
			}
		}
		for _, name := range c.EndpointNames() {
			if e := c.Endpoints[name]; e != nil && e.Auth != nil && !e.Auth.Off {
				ps.add(join(join(join("gateway", "endpoints"), name), "auth"), `no credentials are configured to check: add "gateway": {"auth": {...}}`)
			}
		}
		return
	}
	path := join("gateway", "auth")
	if a.OAuth != nil {
		a.OAuth.check(ps, join(path, "oauth"))
	} else if len(a.APIKeys) == 0 {
		ps.add(path, `configures no credentials: add "oauth" issuers or "apiKeys" (or remove "auth")`)
	}
	c.checkAPIKeys(ps, join(path, "apiKeys"))
	if a.PublicURL != "" {
		p := join(path, "publicUrl")
		u, err := url.Parse(a.PublicURL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
			ps.add(p, `%q is not an http:// or https:// URL (e.g. "https://gw.example.com")`, a.PublicURL)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			ps.add(p, "%q has a user, query or fragment: give only scheme, host and path", a.PublicURL)
		case c.Gateway.HostRouting.Domain != "":
			// Each host-routed server is its own origin; one public URL
			// cannot name them all.
			ps.add(p, "cannot be used with hostRouting (each server has a host of its own): set trustProxyHeaders behind a proxy instead")
		}
	}
	for _, name := range c.Names() {
		if s := c.Servers[name]; s != nil && s.Auth != nil {
			checkScopes(ps, join(join(join("mcpServers", name), "auth"), "scopes"), s.Auth.Scopes)
		}
	}
	for _, name := range c.EndpointNames() {
		if e := c.Endpoints[name]; e != nil && e.Auth != nil {
			checkScopes(ps, join(join(join(join("gateway", "endpoints"), name), "auth"), "scopes"), e.Auth.Scopes)
		}
	}
}

// check records problems with the oauth block.
func (o *OAuth) check(ps *Problems, path string) {
	if len(o.Issuers) == 0 {
		ps.add(join(path, "issuers"), `must list at least one issuer, like {"issuer": "https://auth.example.com"}`)
	}
	checkScopes(ps, join(path, "scopes"), o.Scopes)
	seen := map[string]int{}
	introspecting := -1
	for i, is := range o.Issuers {
		p := index(join(path, "issuers"), i)
		switch {
		case is.Issuer == "":
			ps.add(join(p, "issuer"), "required")
		default:
			if msg := checkAuthURL(is.Issuer, true); msg != "" {
				ps.add(join(p, "issuer"), "%s", msg)
			} else if first, dup := seen[is.Issuer]; dup {
				ps.add(join(p, "issuer"), "%q is already at %s", is.Issuer, index(join(path, "issuers"), first))
			} else {
				seen[is.Issuer] = i
			}
		}
		if is.JWKSURL != "" {
			if msg := checkAuthURL(is.JWKSURL, false); msg != "" {
				ps.add(join(p, "jwksUrl"), "%s", msg)
			}
		}
		for j, aud := range is.Audiences {
			if strings.TrimSpace(aud) == "" {
				ps.add(index(join(p, "audiences"), j), "empty audience")
			}
		}
		if len(is.Algorithms) == 0 {
			ps.add(join(p, "algorithms"), "must list at least one algorithm (leave it out for all of %s)", strings.Join(AllowedAlgorithms, ", "))
		}
		for j, alg := range is.Algorithms {
			if msg := checkAlgorithm(alg); msg != "" {
				ps.add(index(join(p, "algorithms"), j), "%s", msg)
			}
		}
		if in := is.Introspection; in != nil {
			ip := join(p, "introspection")
			if in.URL == "" {
				ps.add(join(ip, "url"), "required")
			} else if msg := checkAuthURL(in.URL, false); msg != "" {
				ps.add(join(ip, "url"), "%s", msg)
			}
			// At the missing one's path: a secret whose variable is unset
			// has its problem there already.
			switch {
			case in.ClientID != "" && in.ClientSecret == "":
				ps.add(join(ip, "clientSecret"), `required with "clientId"`)
			case in.ClientID == "" && in.ClientSecret != "":
				ps.add(join(ip, "clientId"), `required with "clientSecret"`)
			}
			// An opaque token does not say who issued it: with two
			// introspection endpoints, one issuer's tokens would be shown
			// to the other.
			if introspecting >= 0 {
				ps.add(ip, "only one issuer may use introspection (%s does): an opaque token does not say which issuer made it, and would be sent to both",
					index(join(path, "issuers"), introspecting))
			} else {
				introspecting = i
			}
		}
	}
}

// checkAPIKeys records problems with the API keys.
func (c *Config) checkAPIKeys(ps *Problems, path string) {
	names := map[string]int{}
	for i, k := range c.Gateway.Auth.APIKeys {
		p := index(path, i)
		switch {
		case k.Name == "":
			ps.add(join(p, "name"), "required")
		case !validServerName(k.Name):
			ps.add(join(p, "name"), "invalid key name %q (use only letters, digits, '.', '_' and '-')", k.Name)
		default:
			if first, dup := names[k.Name]; dup {
				ps.add(join(p, "name"), "key name %q is already used at %s", k.Name, index(path, first))
			} else {
				names[k.Name] = i
			}
		}
		var sources []string
		for _, s := range []struct{ key, val string }{{"sha256", k.SHA256}, {"keyFile", k.KeyFile}, {"keyEnv", k.KeyEnv}} {
			if s.val != "" {
				sources = append(sources, s.key)
			}
		}
		switch len(sources) {
		case 0:
			ps.add(p, `needs the key: "sha256" (its hash), "keyFile" or "keyEnv"`)
		case 1:
		default:
			ps.add(p, "give only one of %s", strings.Join(sources, ", "))
		}
		if k.SHA256 != "" {
			if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != 32 {
				// The value is a hash, not a secret: it may be shown.
				ps.add(join(p, "sha256"), "%q is not a SHA-256 in hex (64 hex digits, as `printf %%s KEY | sha256sum` prints)", k.SHA256)
			} else if strings.EqualFold(k.SHA256, emptySHA256) {
				ps.add(join(p, "sha256"), "is the SHA-256 of the empty string")
			}
		}
		if k.KeyEnv != "" && !validEnvName(k.KeyEnv) {
			ps.add(join(p, "keyEnv"), "%q is not an environment variable name", k.KeyEnv)
		}
		c.checkKeyTargets(ps, join(p, "servers"), k.Servers, "server", "mcpServers", func(n string) bool { _, ok := c.Servers[n]; return ok })
		c.checkKeyTargets(ps, join(p, "endpoints"), k.Endpoints, "endpoint", "gateway.endpoints", func(n string) bool { _, ok := c.Endpoints[n]; return ok })
		checkScopes(ps, join(p, "scopes"), k.Scopes)
	}
}

// emptySHA256 is the SHA-256 of "", a hash no key may have.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// checkKeyTargets records unknown and repeated names of an API key's
// servers or endpoints.
func (c *Config) checkKeyTargets(ps *Problems, path string, names []string, what, where string, known func(string) bool) {
	seen := map[string]int{}
	for i, n := range names {
		p := index(path, i)
		if first, dup := seen[n]; dup {
			ps.add(p, "%s %q is already listed at %s", what, n, index(path, first))
			continue
		}
		seen[n] = i
		if n != "*" && !known(n) {
			ps.add(p, `unknown %s %q (not in %s; "*" means every one)`, what, n, where)
		}
	}
}

// checkAlgorithm returns what is wrong with a JWS algorithm name, or "".
func checkAlgorithm(alg string) string {
	if slices.Contains(AllowedAlgorithms, alg) {
		return ""
	}
	allowed := strings.Join(AllowedAlgorithms, ", ")
	switch up := strings.ToUpper(alg); {
	case up == "NONE":
		return "\"" + alg + "\" (unsigned tokens) is never accepted; use one of " + allowed
	case strings.HasPrefix(up, "HS"):
		return "\"" + alg + "\" is a shared-secret algorithm: whoever can check a token could make one; use one of " + allowed
	}
	return "\"" + alg + "\" is not one of " + allowed
}

// checkScopes records scopes that are not RFC 6749 scope tokens
// (printable ASCII but space, '"' and '\'): they go in the 401 challenge
// as one space-separated, quoted string.
func checkScopes(ps *Problems, path string, scopes []string) {
	seen := map[string]bool{}
	for i, s := range scopes {
		p := index(path, i)
		switch {
		case s == "":
			ps.add(p, "empty scope")
		case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\\' }):
			ps.add(p, "%q is not a scope (printable ASCII without space, '\"' or '\\')", s)
		case seen[s]:
			ps.add(p, "scope %q is listed twice", s)
		}
		seen[s] = true
	}
}

// checkAuthURL returns what is wrong with the URL of an authorization
// server's issuer, key set or introspection endpoint, or "". Tokens, keys
// and client secrets cross it, so it must be https, but on a loopback
// host (a local authorization server, tests). An issuer identifier has
// no query either (RFC 8414 section 2).
func checkAuthURL(s string, issuer bool) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "\"" + s + "\" is not an https:// URL"
	}
	s = u.Redacted() // a password in the URL stays out of the message
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return "\"" + s + "\" is not https: tokens and secrets would cross the network in clear (http is only for a loopback host)"
	}
	if u.User != nil || u.Fragment != "" || issuer && u.RawQuery != "" {
		if issuer {
			return "\"" + s + "\" has a user, query or fragment, which an issuer identifier cannot have"
		}
		return "\"" + s + "\" has a user or fragment"
	}
	return ""
}

// loopbackHost reports whether host (without port or brackets) is
// localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
