package config

import (
	"encoding/hex"
	"net"
	"net/url"
	"slices"
	"strings"
)

// Validating the auth settings once decoded or built in code: OAuth
// issuers and their URLs, algorithms, scopes, API keys and the servers
// they may reach.

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
	} else if len(a.APIKeys) == 0 && a.Server == nil {
		ps.add(path, `configures no credentials: add "oauth" issuers or "apiKeys" (or remove "auth")`)
	}
	c.checkAPIKeys(ps, join(path, "apiKeys"))
	if a.Server != nil {
		a.Server.check(ps, join(path, "server"))
		if a.OAuth != nil {
			for i, is := range a.OAuth.Issuers {
				if is.Issuer == a.Server.Issuer && is.Issuer != "" {
					// Its keys would be fetched from itself, and two
					// entries of one issuer are refused by the gate.
					ps.add(join(join(path, "server"), "issuer"), "%q is also at %s: the gateway trusts its own server without listing it", is.Issuer, index(join(join(path, "oauth"), "issuers"), i))
				}
			}
		}
	}
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
