package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Validate checks the values of a Config, whether parsed or built in code,
// and returns every problem found as [Problems] (sorted by path), or nil.
// Parse already calls it.
func (c *Config) Validate() error {
	ps := c.problems()
	if len(ps) == 0 {
		return nil
	}
	ps.sort()
	return ps
}

// problems returns every problem with c's values, unsorted.
func (c *Config) problems() Problems {
	var ps Problems
	c.Gateway.check(&ps, "gateway")
	if len(c.Servers) == 0 {
		ps.add("mcpServers", "no servers configured")
	}
	for _, name := range c.Names() {
		path := join("mcpServers", name)
		s := c.Servers[name]
		if s == nil {
			ps.add(path, "missing")
			continue
		}
		if !validServerName(name) {
			ps.add(path, "invalid server name %q (use only letters, digits, '.', '_' and '-': it appears in URLs)", name)
		}
		if s.Name != name {
			ps.add(path, "server Name %q differs from its key", s.Name)
		}
		s.check(&ps, path)
	}
	return ps
}

// CheckListen reports whether addr can be a listen address (host:port).
func CheckListen(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q is not host:port (e.g. \"127.0.0.1:8080\")", addr)
	}
	return nil
}

// check records problems with g's values.
func (g *Gateway) check(ps *Problems, path string) {
	if err := CheckListen(g.Listen); err != nil {
		ps.add(join(path, "listen"), "%v", err)
	}
	for i, o := range g.AllowedOrigins {
		if _, ok := parseOrigin(o); !ok && o != "*" {
			ps.add(index(join(path, "allowedOrigins"), i),
				`%q is not an origin (write "scheme://host" or "scheme://host:port", or "*")`, o)
		}
	}
	positive(ps, join(path, "sessionIdleTimeout"), g.SessionIdleTimeout)
	positive(ps, join(path, "sessionSweepInterval"), g.SessionSweepInterval)
	positive(ps, join(path, "keepAliveInterval"), g.KeepAliveInterval)
	positive(ps, join(path, "drainTimeout"), g.DrainTimeout)
	positive(ps, join(path, "requestTimeout"), g.RequestTimeout)
	atLeast(ps, join(path, "maxSessions"), int64(g.MaxSessions), 1)
	atLeast(ps, join(path, "maxBodyBytes"), g.MaxBodyBytes, 1)
	atLeast(ps, join(path, "sseReplayEvents"), int64(g.SSEReplayEvents), 0)
	atLeast(ps, join(path, "maxLineBytes"), int64(g.MaxLineBytes), 1)
	if dom := g.HostRouting.Domain; dom != "" && !validDomain(dom) {
		ps.add(join(join(path, "hostRouting"), "domain"), "%q is not a domain name (e.g. \"mcp.example.com\")", dom)
	}
	if _, err := ParseLogLevel(g.LogLevel); err != nil {
		ps.add(join(path, "logLevel"), `%q is not one of "debug", "info", "warn", "error"`, g.LogLevel)
	}
}

// check records problems with s's values.
func (s *Server) check(ps *Problems, path string) {
	switch s.Type {
	case TypeStdio:
		if s.Command == "" {
			ps.add(join(path, "command"), "required")
		}
		if s.URL != "" {
			ps.add(join(path, "url"), `only used by "http" and "sse" servers`)
		}
		if len(s.Headers) > 0 {
			ps.add(join(path, "headers"), `only used by "http" and "sse" servers`)
		}
	case TypeHTTP, TypeSSE:
		if s.URL == "" {
			ps.add(join(path, "url"), "required")
		}
		if s.URL != "" {
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ps.add(join(path, "url"), "%q is not an http:// or https:// URL", s.URL)
			}
		}
		if s.Command != "" {
			ps.add(join(path, "command"), `only used by "stdio" servers`)
		}
		if s.Isolation == IsolationSession && s.Prewarm > 0 {
			ps.add(join(path, "prewarm"), "remote servers are not prewarmed")
		}
	default:
		ps.add(join(path, "type"), `%q is not one of "stdio", "http", "sse"`, s.Type)
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			ps.add(join(join(path, "env"), k), "invalid environment variable name")
		}
	}
	switch s.Isolation {
	case IsolationShared, IsolationSession:
	default:
		ps.add(join(path, "isolation"), `%q is not one of "shared", "session"`, s.Isolation)
	}
	positive(ps, join(path, "timeout"), s.Timeout)
	atLeast(ps, join(path, "maxInFlight"), int64(s.MaxInFlight), 0)
	atLeast(ps, join(path, "prewarm"), int64(s.Prewarm), 0)
	if s.Prewarm > 0 && s.Isolation != IsolationSession {
		ps.add(join(path, "prewarm"), `only valid with "isolation": "session" (a shared server has one process)`)
	}
	atLeast(ps, join(path, "maxLineBytes"), int64(s.MaxLineBytes), 1)
	for i, r := range s.Roots {
		p := join(index(join(path, "roots"), i), "uri")
		if r.URI == "" {
			ps.add(p, "required")
			continue
		}
		// MCP roots are file: URIs ("MUST be a file:// URI" in the spec).
		if u, err := url.Parse(r.URI); err != nil || !strings.EqualFold(u.Scheme, "file") {
			ps.add(p, "%q is not a file:// URI", r.URI)
		}
	}
}

// positive records a problem if d is not greater than zero.
func positive(ps *Problems, path string, d time.Duration) {
	if d <= 0 {
		ps.add(path, "must be greater than 0, not %q", formatDuration(d))
	}
}

// atLeast records a problem if n < least.
func atLeast(ps *Problems, path string, n, least int64) {
	if n < least {
		ps.add(path, "must be at least %d, not %d", least, n)
	}
}

// validServerName reports whether name matches [A-Za-z0-9._-]+.
func validServerName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// validDomain reports whether s is a plain DNS name: dot-separated labels
// of letters, digits and '-', no scheme, port or path.
func validDomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
