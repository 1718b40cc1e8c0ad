package admission

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// This file is the origin a client reached the gateway at, from which a
// target's protected resource URL (RFC 9728) is built: the request's
// scheme and host, a trusted proxy's X-Forwarded-Proto and
// X-Forwarded-Host, or the configured public URL. Every host is checked
// strictly: what it yields goes into URLs and WWW-Authenticate headers.

// RequestOrigin is the canonical origin ("scheme://host[:port]", lower
// case, no default port) a client reached r at: its scheme and Host, or,
// when proxy headers are trusted, the first proxy's X-Forwarded-Proto and
// X-Forwarded-Host. It reports false when the host is not a valid host
// name (it would not make a URL, and must not reach a header).
func RequestOrigin(r *http.Request, trustProxy bool) (string, bool) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if trustProxy {
		if p := firstField(r.Header.Get("X-Forwarded-Proto")); strings.EqualFold(p, "https") || strings.EqualFold(p, "http") {
			scheme = strings.ToLower(p)
		}
		if fh := firstField(r.Header.Get("X-Forwarded-Host")); fh != "" {
			host = fh
		}
	}
	return canonicalOrigin(scheme, host)
}

// firstField is the first of a comma-separated header's values, trimmed:
// the first proxy's view.
func firstField(v string) string {
	v, _, _ = strings.Cut(v, ",")
	return strings.TrimSpace(v)
}

// canonicalOrigin returns scheme://host with host lower-cased and a
// default port dropped, or false when host is not a DNS name, IPv4
// address or bracketed IPv6 address with an optional port.
func canonicalOrigin(scheme, host string) (string, bool) {
	name, port, ok := splitHost(host)
	if !ok {
		return "", false
	}
	out := scheme + "://" + strings.ToLower(name)
	if port != "" && !(scheme == "https" && port == "443") && !(scheme == "http" && port == "80") {
		out += ":" + port
	}
	return out, true
}

// splitHost splits a Host value into its name (an IPv6 address keeps its
// brackets) and port ("" when none), checking both strictly: a name of
// letters, digits, '-', '.' and '_'; a port of 1 to 5 digits.
func splitHost(host string) (name, port string, ok bool) {
	if host == "" || len(host) > 260 {
		return "", "", false
	}
	if host[0] == '[' {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", "", false
		}
		name, rest := host[:end+1], host[end+1:]
		if !strings.Contains(name, ":") || net.ParseIP(name[1:end]) == nil {
			return "", "", false
		}
		if rest != "" {
			if rest[0] != ':' {
				return "", "", false
			}
			port = rest[1:]
			if !validPort(port) {
				return "", "", false
			}
		}
		return name, port, true
	}
	name, port, hasPort := strings.Cut(host, ":")
	if hasPort && !validPort(port) || name == "" || len(name) > 253 {
		return "", "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", "", false
		}
	}
	return name, port, true
}

func validPort(p string) bool {
	return len(p) >= 1 && len(p) <= 5 && strings.Trim(p, "0123456789") == ""
}

// ParsePublicURL splits the gateway's public URL (front.Config.PublicURL) into its canonical origin and
// its path (without a trailing '/'; "" for none): a gateway behind a
// proxy that serves it under a prefix has its resources under that path,
// and their metadata at the well-known path inserted before it.
func ParsePublicURL(s string) (origin, path string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", "", errors.New("not an http(s) URL of scheme, host and optional path")
	}
	origin, ok := canonicalOrigin(scheme, u.Host)
	if !ok {
		return "", "", errors.New("its host is not a valid host name")
	}
	return origin, strings.TrimRight(u.EscapedPath(), "/"), nil
}
