package config

import (
	"net/url"
	"strings"
	"time"
)

// Validating "gateway.auth.server" once decoded (or built in code).

// maxAccessTokenTTL bounds an access token's life: the gate refuses a
// revoked grant's tokens at once, but a stolen token of another replica
// that missed the revocation, or of a state file restored from backup,
// lives this long.
const maxAccessTokenTTL = 24 * time.Hour

// check records problems with the authorization server block at path.
func (s *AuthServer) check(ps *Problems, path string) {
	switch {
	case s.Issuer == "":
		ps.add(join(path, "issuer"), `required (or set gateway.auth.publicUrl): the URL clients reach the gateway at, like "https://gw.example.com"`)
	default:
		if msg := checkAuthURL(s.Issuer, true); msg != "" {
			ps.add(join(path, "issuer"), "%s", msg)
		}
	}
	names := map[string]int{}
	for i, u := range s.Users {
		p := index(join(path, "users"), i)
		switch {
		case u.Name == "":
			ps.add(join(p, "name"), "required")
		case !validUserName(u.Name):
			ps.add(join(p, "name"), "invalid user name %q (use only letters, digits, '.', '_', '-' and '@')", u.Name)
		default:
			if first, dup := names[u.Name]; dup {
				ps.add(join(p, "name"), "user %q is already at %s", u.Name, index(join(path, "users"), first))
			} else {
				names[u.Name] = i
			}
		}
		if h := u.PasswordHash; h != "" && !strings.HasPrefix(h, "$argon2id$") && !strings.HasPrefix(h, "$2a$") &&
			!strings.HasPrefix(h, "$2b$") && !strings.HasPrefix(h, "$2y$") {
			// Never the value: it may be a password pasted in by mistake.
			ps.add(join(p, "passwordHash"), "is not an argon2id or bcrypt hash (as `mcpgate passwd` prints: \"$argon2id$...\" or \"$2b$...\")")
		}
	}
	if len(s.Users) == 0 && !s.SignInCode {
		ps.add(join(path, "signInCode"), "false with no users: nobody could sign in (add users, or leave signInCode on for the first sign-in)")
	}
	for i, uri := range s.RedirectURIs {
		if msg := checkRedirectPattern(uri); msg != "" {
			ps.add(index(join(path, "redirectUris"), i), "%s", msg)
		}
	}
	if len(s.Scopes) == 0 {
		ps.add(join(path, "scopes"), `must list at least one scope, like ["mcp"]`)
	}
	checkScopes(ps, join(path, "scopes"), s.Scopes)
	switch {
	case s.AccessTokenTTL <= 0:
		ps.add(join(path, "accessTokenTtl"), "must be positive (e.g. \"10m\")")
	case s.AccessTokenTTL > maxAccessTokenTTL:
		ps.add(join(path, "accessTokenTtl"), "%s is more than %s: access tokens should be short-lived (refresh tokens last longer)", s.AccessTokenTTL, maxAccessTokenTTL)
	}
	switch {
	case s.RefreshTokenTTL <= 0:
		ps.add(join(path, "refreshTokenTtl"), "must be positive (e.g. \"720h\")")
	case s.AccessTokenTTL > 0 && s.RefreshTokenTTL < s.AccessTokenTTL:
		ps.add(join(path, "refreshTokenTtl"), "%s is shorter than accessTokenTtl (%s)", s.RefreshTokenTTL, s.AccessTokenTTL)
	}
	if strings.TrimSpace(s.StateFile) == "" {
		ps.add(join(path, "stateFile"), "empty file name")
	}
}

// validUserName reports whether name can be a user's name.
func validUserName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(c rune) bool {
		return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '@')
	})
}

// checkRedirectPattern returns what is wrong with a redirect URI pattern
// of redirectUris, or "": an absolute https URL (http on a loopback
// host), no user or fragment, "*" only as one whole host label or as the
// port.
func checkRedirectPattern(p string) string {
	// Where the stars are, in the pattern itself, before url.Parse sees
	// them.
	if _, rest, ok := strings.Cut(p, "://"); ok {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		hostport := rest[:end]
		if strings.Contains(rest[end:], "*") {
			return "\"" + p + "\": \"*\" may stand only for a host label or the port, not in the path or query"
		}
		host, port := hostport, ""
		if i := strings.LastIndexByte(hostport, ':'); i >= 0 && !strings.HasSuffix(hostport, "]") {
			host, port = hostport[:i], hostport[i+1:]
		}
		if strings.Contains(port, "*") && port != "*" {
			return "\"" + p + "\": \"*\" must be the whole port"
		}
		labels := strings.Split(host[strings.LastIndexByte(host, '@')+1:], ".")
		for i, l := range labels {
			if strings.Contains(l, "*") && l != "*" {
				return "\"" + p + "\": \"*\" must be a whole host label (\"https://*.example.com/cb\")"
			}
			if l == "*" && i >= len(labels)-2 {
				// "https://*.com/" would let anyone register a domain of it.
				return "\"" + p + "\": \"*\" may not stand for the registrable domain, only for a label under it"
			}
		}
	}
	u, err := url.Parse(strings.ReplaceAll(strings.ReplaceAll(p, ":*", ":1"), "*", "x"))
	if err != nil || u.Host == "" || u.Opaque != "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "\"" + p + "\" is not an absolute https:// URL"
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return "\"" + p + "\" is not https: the code would cross the network in clear (http is only for a loopback host)"
	}
	if u.User != nil || u.Fragment != "" {
		return "\"" + p + "\" has a user or fragment, which a redirect URI cannot have (RFC 6749 3.1.2)"
	}
	return ""
}
