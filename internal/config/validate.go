package config

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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
		if len(c.Disabled) > 0 {
			ps.add("mcpServers", "every server is disabled (\"disabled\": true)")
		} else {
			ps.add("mcpServers", "no servers configured")
		}
	}
	c.checkDisabled(&ps)
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
		s.checkFilters(&ps, path)
		s.checkPrincipalHeaders(&ps, path, c.Gateway.SecretsFile)
	}
	c.checkEndpoints(&ps)
	c.checkAuth(&ps)
	return ps
}

// CheckListen reports whether addr can be a listen address: host:port
// with a numeric port from 0 to 65535 and a host that is empty (every
// interface), an IP address or a host name.
func CheckListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. \"127.0.0.1:8080\")", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || port == "" || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	if host != "" && net.ParseIP(host) == nil && !validDomain(host) {
		return fmt.Errorf("%q: %q is not an IP address or host name", addr, host)
	}
	return nil
}

// validHost reports whether s can be an allowedHosts entry: "*", an IP
// address (IPv6 with or without brackets) or a host name, without port.
func validHost(s string) bool {
	if s == "*" {
		return true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return net.ParseIP(s[1:len(s)-1]) != nil
	}
	return net.ParseIP(s) != nil || validDomain(s)
}

// validEnvName reports whether k can name an environment variable.
func validEnvName(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}

// check records problems with g's values.
func (g *Gateway) check(ps *Problems, path string) {
	g.checkLimits(ps, path)
	g.checkSeal(ps, path)
	g.checkCluster(ps, path) // cluster.go
	g.checkAdmin(ps, path)
	g.checkTLS(ps, path)
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
	atLeast(ps, join(path, "sseReplayBytes"), g.SSEReplayBytes, 1)
	atLeast(ps, join(path, "sessionReplayBytes"), g.SessionReplayBytes, 1)
	positive(ps, join(path, "headerTimeout"), g.HeaderTimeout)
	positive(ps, join(path, "bodyReadTimeout"), g.BodyReadTimeout)
	positive(ps, join(path, "replyWait"), g.ReplyWait)
	positive(ps, join(path, "inputWait"), g.InputWait)
	positive(ps, join(path, "idleTimeout"), g.IdleTimeout)
	atLeast(ps, join(path, "maxConnections"), int64(g.MaxConnections), 1)
	for i, h := range g.AllowedHosts {
		if !validHost(h) {
			ps.add(index(join(path, "allowedHosts"), i),
				`%q is not a host name or IP address (write it without scheme or port, e.g. "mcp.example.com"), or "*"`, h)
		}
	}
	atLeast(ps, join(path, "maxLineBytes"), int64(g.MaxLineBytes), 1)
	if dom := g.HostRouting.Domain; dom != "" && !validDomain(dom) {
		ps.add(join(join(path, "hostRouting"), "domain"), "%q is not a domain name (e.g. \"mcp.example.com\")", dom)
	}
	if _, err := ParseLogLevel(g.LogLevel); err != nil {
		ps.add(join(path, "logLevel"), `%q is not one of "debug", "info", "warn", "error"`, g.LogLevel)
	}
	if CheckLogFormat(g.LogFormat) != nil {
		ps.add(join(path, "logFormat"), `%q is not one of "text", "json"`, g.LogFormat)
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
		checkHeaders(ps, join(path, "headers"), s.Headers)
	default:
		ps.add(join(path, "type"), `%q is not one of "stdio", "http", "sse"`, s.Type)
	}
	for k := range s.Env {
		if !validEnvName(k) {
			ps.add(join(join(path, "env"), k), "invalid environment variable name")
		}
	}
	for i, k := range s.InheritEnv {
		if !validEnvName(k) {
			ps.add(index(join(path, "inheritEnv"), i), "%q is not an environment variable name", k)
		}
	}
	positive(ps, join(path, "initTimeout"), s.InitTimeout)
	if s.PingInterval < 0 {
		ps.add(join(path, "pingInterval"), `must be "0" (off) or greater, not %q`, formatDuration(s.PingInterval))
	}
	positive(ps, join(path, "stdinTimeout"), s.StdinTimeout)
	atLeast(ps, join(path, "maxProcesses"), int64(s.MaxProcesses), 1)
	if s.Prewarm > s.MaxProcesses && s.MaxProcesses >= 1 {
		ps.add(join(path, "prewarm"), "must be at most maxProcesses (%d), not %d", s.MaxProcesses, s.Prewarm)
	}
	atLeast(ps, join(path, "stderrBytesPerSec"), int64(s.StderrBytesPerSec), 1)
	if _, err := ParseLogLevel(s.StderrLevel); err != nil {
		ps.add(join(path, "stderrLevel"), `%q is not one of "debug", "info", "warn", "error"`, s.StderrLevel)
	}
	switch s.Isolation {
	case IsolationShared, IsolationSession:
	default:
		ps.add(join(path, "isolation"), `%q is not one of "shared", "session"`, s.Isolation)
	}
	switch s.Protocol {
	case ProtocolAuto:
	case ProtocolModern:
		if s.Type == TypeSSE {
			ps.add(join(path, "protocol"), `%q is not valid for an "sse" server (the legacy transport has no 2026-07-28); use "auto"`, s.Protocol)
		}
	case ProtocolSessions, ProtocolLegacy:
		if s.Type != TypeStdio {
			ps.add(join(path, "protocol"), `%q is only valid for "stdio" servers (the gateway runs no process for a remote one to translate for); use "auto"`, s.Protocol)
		}
	default:
		ps.add(join(path, "protocol"), `%q is not one of "auto", "2026-07-28", "sessions" (or its old name "legacy")`, s.Protocol)
	}
	positive(ps, join(path, "timeout"), s.Timeout)
	atLeast(ps, join(path, "maxInFlight"), int64(s.MaxInFlight), 0)
	atLeast(ps, join(path, "prewarm"), int64(s.Prewarm), 0)
	s.checkProcesses(ps, join(path, "processes"))
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

// checkProcesses records problems with s.Processes (key path p): an
// integer from 1 to MaxPoolProcesses, above 1 only for a shared stdio
// server (a session's process or a remote's upstream session is one per
// session already). 0 is a literal Server's default, 1.
func (s *Server) checkProcesses(ps *Problems, p string) {
	switch {
	case s.Processes < 0 || s.Processes > MaxPoolProcesses:
		ps.add(p, "must be from 1 to %d, not %d", MaxPoolProcesses, s.Processes)
	case s.Processes <= 1:
	case s.Isolation == IsolationSession:
		ps.add(p, `%d is only valid with "isolation": "shared" (a session-mode server has a process per session)`, s.Processes)
	case s.Type != TypeStdio:
		ps.add(p, `%d is only valid for "stdio" servers (a remote's sessions each have an upstream session)`, s.Processes)
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

// transportHeaders are set by the remote transport on every request; a
// server's headers may not set them (the transport would refuse to open
// any session).
var transportHeaders = []string{"Accept", "Content-Type", "Content-Length", "Host",
	"Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

// checkHeaders records every header of a remote server that no request
// could carry: a name that is not an HTTP token, a value with a control
// character (CR or LF would split the request), or a header the transport
// sets itself. Values are never echoed: they usually hold secrets.
func checkHeaders(ps *Problems, path string, headers map[string]string) {
	for name, value := range headers {
		p := join(path, name)
		switch {
		case !validHeaderName(name):
			ps.add(p, "invalid header name")
		case strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
			ps.add(p, "value contains a control character (CR, LF, NUL...)")
		case slices.Contains(transportHeaders, http.CanonicalHeaderKey(name)):
			ps.add(p, "set by the gateway's transport; remove it")
		}
	}
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
