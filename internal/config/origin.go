package config

import (
	"net/url"
	"strings"
)

// defaultOrigins are the local origins allowed by default: a page served
// from this machine, on any port. Anything else must be listed, because a
// browser on a remote page must not reach local tools (DNS rebinding; the
// MCP transport spec requires servers to validate Origin).
func defaultOrigins() []string {
	var origins []string
	for _, scheme := range []string{"http", "https"} {
		for _, host := range []string{"localhost", "127.0.0.1", "[::1]"} {
			origins = append(origins, scheme+"://"+host)
		}
	}
	return origins
}

// OriginAllowed reports whether a request with this Origin header may be
// served. An empty origin (a non-browser client) is allowed. Otherwise the
// origin's scheme and host are compared, without regard to case, with each
// AllowedOrigins entry: an entry without a port matches any port, an entry
// with a port only that port (a default port may be written or left out).
// The entry "*" allows every origin, including "null". The origin of
// auth.publicUrl, when set, is always allowed: a page served from the
// gateway's own public origin is the gateway's, and a browser sends that
// Origin on its requests through the proxy (Host and Origin then agree).
func (g *Gateway) OriginAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	o, ok := parseOrigin(origin)
	if ok && g.Auth != nil && g.Auth.PublicURL != "" {
		if pub, err := url.Parse(g.Auth.PublicURL); err == nil && pub.Hostname() != "" &&
			strings.EqualFold(pub.Scheme, o.Scheme) && strings.EqualFold(pub.Hostname(), o.Hostname()) && port(pub) == port(o) {
			return true
		}
	}
	for _, entry := range g.AllowedOrigins {
		if entry == "*" {
			return true
		}
		if !ok {
			continue
		}
		e, eok := parseOrigin(entry)
		if !eok || !strings.EqualFold(e.Scheme, o.Scheme) ||
			!strings.EqualFold(e.Hostname(), o.Hostname()) {
			continue
		}
		if e.Port() == "" || port(e) == port(o) {
			return true
		}
	}
	return false
}

// parseOrigin parses "scheme://host[:port]", tolerating a trailing slash.
func parseOrigin(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Hostname() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, false
	}
	return u, true
}

// port returns u's port, or the scheme's default port when none is written.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	}
	return ""
}
