package authserver

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// The redirect URI policy: where a client may send a user back to with an
// authorization code. A code in the wrong hands is a token in the wrong
// hands (PKCE only helps when the attacker is not also the client), so a
// redirect URI is refused unless it is plainly one of:
//
//   - a configured URL (gateway.auth.server.redirectUris), exactly, or a
//     configured pattern in which "*" stands for one whole host label or
//     for the port;
//   - a loopback URL (http://127.0.0.1, http://[::1], http://localhost)
//     on any port and path, for local clients (RFC 8252 7.3), when
//     loopbackRedirects is on.
//
// "Plainly" is the point: a URI that two parsers could read differently
// never gets as far as a comparison. So only printable ASCII (a Unicode
// confusable of claude.ai is refused, not compared), no userinfo
// (claude.ai@evil.com), no percent-encoding in the authority
// (claude.ai%2eevil.com), no fragment (RFC 6749 3.1.2), no trailing dot
// or empty host label, no backslash, no dot segment or encoded '/', '\'
// or '.' in the path (/api/mcp/auth_callback/../x), and net/url must
// agree with our split. The path and query of a configured URL are
// compared byte for byte.

// maxRedirectURILen bounds one redirect URI: a URL longer than browsers
// keep in an address bar is no callback.
const maxRedirectURILen = 2000

// errRedirect is the reason a redirect URI is refused (wrapped with the
// detail).
var errRedirect = errors.New("redirect URI refused")

// redirectParts is a redirect URI split into what the policy compares.
// scheme and host are lower case; port is "" when absent; rest is the
// path and query, exactly as written.
type redirectParts struct {
	scheme, host, port, rest string
}

// parseRedirectURI splits s strictly, refusing every form listed above.
// It parses patterns too (wildcard true): then a host label or the port
// may be "*".
func parseRedirectURI(s string, wildcard bool) (redirectParts, error) {
	var p redirectParts
	if s == "" || len(s) > maxRedirectURILen {
		return p, fmt.Errorf("%w: empty or longer than %d bytes", errRedirect, maxRedirectURILen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\\<>\"{}|^`", c) >= 0 {
			return p, fmt.Errorf("%w: byte %#x at %d is not allowed", errRedirect, c, i)
		}
	}
	if strings.IndexByte(s, '#') >= 0 {
		return p, fmt.Errorf("%w: has a fragment", errRedirect)
	}
	scheme, after, ok := strings.Cut(s, "://")
	if !ok {
		return p, fmt.Errorf("%w: not an absolute http(s) URL", errRedirect)
	}
	p.scheme = strings.ToLower(scheme)
	if p.scheme != "https" && p.scheme != "http" {
		return p, fmt.Errorf("%w: scheme %q is not https", errRedirect, scheme)
	}
	authority := after
	if i := strings.IndexAny(after, "/?"); i >= 0 {
		authority, p.rest = after[:i], after[i:]
	}
	if strings.IndexByte(authority, '@') >= 0 {
		return p, fmt.Errorf("%w: has userinfo", errRedirect)
	}
	if strings.IndexByte(authority, '%') >= 0 {
		return p, fmt.Errorf("%w: percent-encoding in the host", errRedirect)
	}
	if err := p.splitAuthority(authority, wildcard); err != nil {
		return p, err
	}
	if err := checkRedirectRest(p.rest, wildcard); err != nil {
		return p, err
	}
	if wildcard && (strings.Contains(p.host, "*") || p.port == "*") {
		return p, nil // net/url cannot parse a pattern; its parts were checked above
	}
	// A second opinion: the URL the provider will build the redirect
	// from must have the very host and port we compared.
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.User != nil || u.Fragment != "" ||
		!strings.EqualFold(u.Host, authority) || strings.ToLower(u.Scheme) != p.scheme {
		return p, fmt.Errorf("%w: not a plain URL", errRedirect)
	}
	return p, nil
}

// splitAuthority fills host and port from authority, refusing hosts that
// are not plain DNS names or IP literals.
func (p *redirectParts) splitAuthority(authority string, wildcard bool) error {
	host := authority
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return fmt.Errorf("%w: unclosed IPv6 literal", errRedirect)
		}
		host, authority = authority[:end+1], authority[end+1:]
		if authority != "" && authority[0] != ':' {
			return fmt.Errorf("%w: junk after the IPv6 literal", errRedirect)
		}
		if authority != "" {
			p.port = authority[1:]
			if p.port == "" {
				return fmt.Errorf("%w: empty port", errRedirect)
			}
		}
		if strings.Trim(host[1:len(host)-1], "0123456789abcdefABCDEF:.") != "" || len(host) < 4 {
			return fmt.Errorf("%w: bad IPv6 literal", errRedirect)
		}
	} else if h, port, ok := strings.Cut(authority, ":"); ok {
		host, p.port = h, port
		if port == "" {
			return fmt.Errorf("%w: empty port", errRedirect)
		}
	}
	p.host = strings.ToLower(host)
	if p.port != "" && !(wildcard && p.port == "*") {
		if n, err := strconv.Atoi(p.port); err != nil || n < 1 || n > 65535 || p.port[0] < '1' || p.port[0] > '9' {
			return fmt.Errorf("%w: bad port %q", errRedirect, p.port)
		}
	}
	if strings.HasPrefix(p.host, "[") {
		return nil
	}
	if p.host == "" || len(p.host) > 253 {
		return fmt.Errorf("%w: no host", errRedirect)
	}
	for _, label := range strings.Split(p.host, ".") {
		if wildcard && label == "*" {
			continue
		}
		if !dnsLabel(label) {
			return fmt.Errorf("%w: host %q is not a plain DNS name (label %q)", errRedirect, host, label)
		}
	}
	return nil
}

// dnsLabel reports whether l is a letter-digit-hyphen label (RFC 1123):
// no empty label (a trailing dot), no underscore, nothing non-ASCII.
func dnsLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// checkRedirectRest refuses path tricks: a path that does not start at
// the root, dot segments, and percent-encodings of '/', '\', '.', '%'
// (a double encoding) or a control byte, any of which a server behind
// the callback might undo into a different path than the one compared.
func checkRedirectRest(rest string, wildcard bool) error {
	path, _, _ := strings.Cut(rest, "?")
	if path != "" && path[0] != '/' {
		return fmt.Errorf("%w: path does not start with /", errRedirect)
	}
	if wildcard && strings.IndexByte(rest, '*') >= 0 {
		return fmt.Errorf("%w: \"*\" stands for a host label or a port only", errRedirect)
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%w: dot segment in the path", errRedirect)
		}
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] != '%' {
			continue
		}
		if i+2 >= len(rest) || !redirectHex(rest[i+1]) || !redirectHex(rest[i+2]) {
			return fmt.Errorf("%w: bad percent-encoding", errRedirect)
		}
		b := redirectUnhex(rest[i+1])<<4 | redirectUnhex(rest[i+2])
		if i < len(path) && (b == '/' || b == '\\' || b == '.' || b == '%') || b < 0x20 || b == 0x7f {
			return fmt.Errorf("%w: encoded %q in the path", errRedirect, b)
		}
	}
	return nil
}

func redirectHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func redirectUnhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// loopbackHosts are the hosts of RFC 8252 7.3 loopback redirects.
// Only these spellings: 127.1, 0x7f.0.0.1 and localhost. are other
// parsers' business.
var loopbackHosts = map[string]bool{"127.0.0.1": true, "[::1]": true, "localhost": true}

func (p redirectParts) loopback() bool {
	return p.scheme == "http" && loopbackHosts[p.host]
}

// redirectPolicy decides which redirect URIs a client may register and
// use. Built once from the config; read-only after.
type redirectPolicy struct {
	patterns []redirectParts
	loopback bool
}

// newRedirectPolicy parses the configured URLs and patterns. A pattern
// must be https (http only for a loopback host), and a "*" label must be
// followed by at least two fixed labels: "*.com" would hand a code to
// anyone who owns a .com name.
func newRedirectPolicy(patterns []string, loopback bool) (*redirectPolicy, error) {
	rp := &redirectPolicy{loopback: loopback}
	for i, s := range patterns {
		p, err := parseRedirectURI(s, true)
		if err != nil {
			return nil, fmt.Errorf("gateway.auth.server.redirectUris[%d]: %w", i, err)
		}
		if p.scheme == "http" && !loopbackHosts[p.host] {
			return nil, fmt.Errorf("gateway.auth.server.redirectUris[%d]: %q: http is for loopback hosts only", i, s)
		}
		labels := strings.Split(p.host, ".")
		if last := lastLabel(labels, "*"); last >= 0 && len(labels)-last-1 < 2 {
			return nil, fmt.Errorf("gateway.auth.server.redirectUris[%d]: %q: \"*\" needs two fixed labels after it", i, s)
		}
		rp.patterns = append(rp.patterns, p)
	}
	return rp, nil
}

func lastLabel(labels []string, v string) int {
	for i := len(labels) - 1; i >= 0; i-- {
		if labels[i] == v {
			return i
		}
	}
	return -1
}

// check returns nil when uri may be registered and used, else why not.
func (rp *redirectPolicy) check(uri string) error {
	p, err := parseRedirectURI(uri, false)
	if err != nil {
		return err
	}
	for _, pat := range rp.patterns {
		if pat.matches(p) {
			return nil
		}
	}
	switch {
	case p.loopback() && rp.loopback:
		return nil
	case p.loopback():
		return fmt.Errorf("%w: loopback redirects are off", errRedirect)
	case p.scheme != "https":
		return fmt.Errorf("%w: http is for loopback hosts only", errRedirect)
	}
	return fmt.Errorf("%w: not among gateway.auth.server.redirectUris", errRedirect)
}

// matches reports whether u fits pattern pat: same scheme, same number of
// host labels each equal or "*", same port or "*" (any port, or none),
// same path and query byte for byte.
func (pat redirectParts) matches(u redirectParts) bool {
	if pat.scheme != u.scheme || pat.rest != u.rest {
		return false
	}
	if pat.port != "*" && pat.port != u.port {
		return false
	}
	if pat.host == u.host {
		return true
	}
	pl, ul := strings.Split(pat.host, "."), strings.Split(u.host, ".")
	if len(pl) != len(ul) || strings.HasPrefix(u.host, "[") {
		return false
	}
	for i := range pl {
		if pl[i] != "*" && pl[i] != ul[i] {
			return false
		}
	}
	return true
}

// registeredRedirect is the comparison /authorize makes: whether uri is
// one of a client's registered redirect URIs. Exact string equality
// (RFC 9700 2.1), with one exception: a loopback URI matches a
// registered one that differs only in its port, since a native client
// listens on whatever port the system gives it (RFC 8252 7.3). It does
// not apply the policy; the provider asks redirectAllowed too, so that a
// URI the policy stopped allowing since registration is refused.
func registeredRedirect(registered []string, uri string) bool {
	for _, r := range registered {
		if r == uri {
			return true
		}
	}
	u, err := parseRedirectURI(uri, false)
	if err != nil || !u.loopback() {
		return false
	}
	for _, r := range registered {
		p, err := parseRedirectURI(r, false)
		if err == nil && p.loopback() && p.host == u.host && p.rest == u.rest {
			return true
		}
	}
	return false
}
