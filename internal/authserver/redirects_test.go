package authserver

import (
	"net/url"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

func defaultPolicy(t testing.TB) *redirectPolicy {
	t.Helper()
	p, err := newRedirectPolicy(config.DefaultRedirectURIs, true)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRedirectPolicyDefaults(t *testing.T) {
	p := defaultPolicy(t)
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		// Claude's callbacks, exactly.
		{"https://claude.ai/api/mcp/auth_callback", true},
		{"https://claude.com/api/mcp/auth_callback", true},
		{"HTTPS://Claude.AI/api/mcp/auth_callback", true}, // scheme and host compare without case (RFC 3986 6.2.2.1)
		{"https://claude.ai/api/mcp/auth_callback?x=1", false},
		{"https://claude.ai/api/mcp/auth_callback/", false},
		{"https://claude.ai/api/mcp/Auth_callback", false},
		{"https://claude.ai:443/api/mcp/auth_callback", false},
		{"https://claude.ai:8443/api/mcp/auth_callback", false},
		{"http://claude.ai/api/mcp/auth_callback", false},
		{"https://www.claude.ai/api/mcp/auth_callback", false},
		// Look-alike hosts.
		{"https://claude.ai.evil.com/api/mcp/auth_callback", false},
		{"https://claude.ai@evil.com/api/mcp/auth_callback", false},
		{"https://evil.com@claude.ai/api/mcp/auth_callback", false},
		{"https://claude.ai:x@evil.com/api/mcp/auth_callback", false},
		{"https://claude.ai%2eevil.com/api/mcp/auth_callback", false},
		{"https://claude%2eai/api/mcp/auth_callback", false},
		{"https://claude.ai./api/mcp/auth_callback", false},
		{"https://claude..ai/api/mcp/auth_callback", false},
		{"https://clаude.ai/api/mcp/auth_callback", false}, // Cyrillic а
		{"https://claude.ａi/api/mcp/auth_callback", false}, // fullwidth a
		{"https://claude.ai\u200b/api/mcp/auth_callback", false},
		{"https://xn--clude-jye.ai/api/mcp/auth_callback", false}, // the punycode of a confusable
		{"https://claude.ai\\@evil.com/api/mcp/auth_callback", false},
		{"https://claude.ai\\.evil.com/api/mcp/auth_callback", false},
		{"https://claude_ai/api/mcp/auth_callback", false},
		{"https://-claude.ai/api/mcp/auth_callback", false},
		{"https://claude.ai:/api/mcp/auth_callback", false},
		{"https://claude.ai:0443/api/mcp/auth_callback", false},
		{"https:///api/mcp/auth_callback", false},
		{"//claude.ai/api/mcp/auth_callback", false},
		{"claude.ai/api/mcp/auth_callback", false},
		{"https:claude.ai/api/mcp/auth_callback", false},
		// Fragments, path tricks.
		{"https://claude.ai/api/mcp/auth_callback#x", false},
		{"https://claude.ai/api/mcp/auth_callback#", false},
		{"https://claude.ai/api/mcp/auth_callback/../x", false},
		{"https://claude.ai/api/mcp/../mcp/auth_callback", false},
		{"https://claude.ai/api/mcp/./auth_callback", false},
		{"https://claude.ai/api/mcp/auth_callback/..", false},
		{"https://claude.ai/api/mcp/auth_callback%2f..%2fx", false},
		{"https://claude.ai/api/mcp%2Fauth_callback", false},
		{"https://claude.ai/api/mcp/auth_callback%2e%2e", false},
		{"https://claude.ai/api/mcp/%2e%2e/mcp/auth_callback", false},
		{"https://claude.ai/api/mcp/auth_callback%5c..", false},
		{"https://claude.ai/api/mcp/auth_callback%252e%252e", false},
		{"https://claude.ai/api/mcp/auth_callback%00", false},
		{"https://claude.ai/api/mcp/auth_callback%zz", false},
		{"https://claude.ai//api/mcp/auth_callback", false},
		{"https://claude.ai/api/mcp/auth_callback\t", false},
		{"https://claude.ai/api/mcp/auth callback", false},
		{" https://claude.ai/api/mcp/auth_callback", false},
		// Other schemes.
		{"javascript://claude.ai/api/mcp/auth_callback", false},
		{"data:text/html,x", false},
		{"file:///etc/passwd", false},
		{"ftp://claude.ai/api/mcp/auth_callback", false},
		{"com.example.app:/callback", false},
		{"", false},
		{"https://claude.ai/" + strings.Repeat("a", maxRedirectURILen), false},
		// Loopback, any port and path (RFC 8252 7.3).
		{"http://127.0.0.1/callback", true},
		{"http://127.0.0.1:33418/callback", true},
		{"http://[::1]:8080/oauth/callback?x=y", true},
		{"http://localhost:6274/oauth/callback", true},
		{"http://LOCALHOST:6274/oauth/callback", true},
		{"http://localhost:6274/oauth/../callback", false},
		{"http://localhost:6274/oauth%2fcallback", false},
		{"http://localhost:6274/callback#x", false},
		{"http://user@localhost:6274/callback", false},
		{"http://localhost.:6274/callback", false},
		{"http://localhost.evil.com:6274/callback", false},
		{"http://evil.localhost:6274/callback", false},
		{"http://127.1:6274/callback", false},
		{"http://0x7f.0.0.1:6274/callback", false},
		{"http://2130706433:6274/callback", false},
		{"http://127.0.0.2:6274/callback", false},
		{"http://[::ffff:127.0.0.1]:6274/callback", false},
		{"http://[::1%25eth0]:6274/callback", false},
		{"http://localhost:99999/callback", false},
		{"http://localhost:65535/callback", true},
		{"https://localhost:6274/callback", false}, // loopback is http; https would need a configured entry
		{"http://10.0.0.1:6274/callback", false},
	} {
		err := p.check(tc.uri)
		if (err == nil) != tc.ok {
			t.Errorf("check(%q) = %v, want ok %v", tc.uri, err, tc.ok)
		}
	}
}

func TestRedirectPolicyLoopbackOff(t *testing.T) {
	p, err := newRedirectPolicy(config.DefaultRedirectURIs, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"http://127.0.0.1:1234/cb", "http://[::1]/cb", "http://localhost:80/cb"} {
		if p.check(uri) == nil {
			t.Errorf("%q allowed with loopbackRedirects off", uri)
		}
	}
	if err := p.check("https://claude.ai/api/mcp/auth_callback"); err != nil {
		t.Errorf("Claude's callback refused with loopback off: %v", err)
	}
}

func TestRedirectPolicyPatterns(t *testing.T) {
	p, err := newRedirectPolicy([]string{
		"https://*.example.com/cb",
		"https://app.example.org:*/oauth/callback",
		"https://*.*.tenant.example.net/cb",
		"http://127.0.0.1:9000/fixed",
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"https://a.example.com/cb", true},
		{"https://a-b.example.com/cb", true},
		{"https://example.com/cb", false},                // "*" is one label, not none
		{"https://a.b.example.com/cb", false},            // nor two
		{"https://a.example.com.evil.com/cb", false},     // the suffix is the whole rest of the host
		{"https://aexample.com/cb", false},               // nor part of a label
		{"https://a.example.com/cb/x", false},            // the path is exact
		{"https://a.example.com/cb?x", false},            // so is the query
		{"https://a.example.com:444/cb", false},          // no port in the pattern: none in the URI
		{"https://a.example.com@evil.com/cb", false},     // userinfo
		{"https://evil.com%2f.example.com/cb", false},    // encoding in the host
		{"https://*.example.com/cb", false},              // a URI's "*" is not a wildcard
		{"http://a.example.com/cb", false},               // scheme exact
		{"https://app.example.org/oauth/callback", true}, // ":*" also stands for no port
		{"https://app.example.org:8443/oauth/callback", true},
		{"https://app.example.org:x/oauth/callback", false},
		{"https://app.example.org:8443/oauth/callback2", false},
		{"https://x.y.tenant.example.net/cb", true},
		{"https://x.tenant.example.net/cb", false},
		{"http://127.0.0.1:9000/fixed", true}, // a configured loopback URL, loopback off
		{"http://127.0.0.1:9001/fixed", false},
	} {
		err := p.check(tc.uri)
		if (err == nil) != tc.ok {
			t.Errorf("check(%q) = %v, want ok %v", tc.uri, err, tc.ok)
		}
	}
}

func TestRedirectPolicyRefusesBadPatterns(t *testing.T) {
	for _, pat := range []string{
		"https://*/cb",
		"https://*.com/cb",
		"https://example.*/cb",
		"https://a*.example.com/cb",
		"https://example.com/*",
		"https://example.com/cb?x=*",
		"http://example.com/cb",
		"https://example.com/cb#frag",
		"https://user@example.com/cb",
		"https://example.com:*x/cb",
		"ftp://example.com/cb",
		"https://example.com/../cb",
		"",
	} {
		if _, err := newRedirectPolicy([]string{pat}, true); err == nil {
			t.Errorf("pattern %q accepted", pat)
		} else if !strings.Contains(err.Error(), "redirectUris[0]") {
			t.Errorf("pattern %q: error %q does not name the key", pat, err)
		}
	}
}

func TestRegisteredRedirect(t *testing.T) {
	registered := []string{
		"https://claude.ai/api/mcp/auth_callback",
		"http://127.0.0.1:33418/callback",
		"http://localhost/oauth/callback",
		"http://[::1]:5000/cb",
	}
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"https://claude.ai/api/mcp/auth_callback", true},
		{"https://CLAUDE.ai/api/mcp/auth_callback", false}, // exact: the registered string
		{"https://claude.ai/api/mcp/auth_callback?x=1", false},
		{"https://claude.ai:443/api/mcp/auth_callback", false},
		{"https://claude.ai/api/mcp/auth_callback#", false},
		{"http://127.0.0.1:33418/callback", true},
		{"http://127.0.0.1:51000/callback", true}, // loopback: any port
		{"http://127.0.0.1/callback", true},
		{"http://127.0.0.1:51000/callback2", false},
		{"http://127.0.0.1:51000/callback?x", false},
		{"http://localhost:51000/callback", false}, // the host is not changed, only the port
		{"http://localhost:8080/oauth/callback", true},
		{"http://[::1]:1/cb", true},
		{"http://[::1]:1/cb/../cb", false},
		{"http://127.0.0.1:51000@evil.com/callback", false},
		{"https://127.0.0.1:51000/callback", false},
		{"http://evil.com:33418/callback", false},
	} {
		if got := registeredRedirect(registered, tc.uri); got != tc.ok {
			t.Errorf("registeredRedirect(%q) = %v, want %v", tc.uri, got, tc.ok)
		}
	}
	if registeredRedirect(nil, "http://127.0.0.1/callback") {
		t.Error("a loopback URI matched no registered URI")
	}
}

// FuzzRedirectURI checks the parser and matcher against net/url on any
// input: whatever the policy allows is a plain http(s) URL whose host is
// loopback or one of the configured ones, and /authorize finds it among
// the URIs it was registered as.
func FuzzRedirectURI(f *testing.F) {
	for _, s := range []string{
		"https://claude.ai/api/mcp/auth_callback", "http://127.0.0.1:3000/cb", "http://[::1]/x?y=z",
		"https://claude.ai@evil.com/", "https://claude.ai%2eevil.com/", "https://a.example.com:8443/cb",
		"https://claude.ai/api/mcp/auth_callback/../x", "http://localhost:1/%2e%2e", "https://[::1%25x]/",
	} {
		f.Add(s, "https://*.example.com:*/cb")
	}
	def := defaultPolicy(f)
	f.Fuzz(func(t *testing.T, uri, pattern string) {
		p, err := newRedirectPolicy([]string{pattern}, true)
		if err != nil {
			p = def
		}
		if p.check(uri) != nil {
			return
		}
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatalf("allowed %q, which net/url refuses: %v", uri, err)
		}
		host := strings.ToLower(u.Hostname())
		if u.User != nil || u.Fragment != "" || strings.ContainsAny(uri, "#\\") || strings.ContainsAny(u.Host, "%@") {
			t.Fatalf("allowed %q with userinfo, fragment or an encoded host", uri)
		}
		switch {
		case u.Scheme == "http" || u.Scheme == "HTTP":
			if host != "127.0.0.1" && host != "::1" && host != "localhost" {
				t.Fatalf("allowed http to %q", host)
			}
		case strings.EqualFold(u.Scheme, "https"):
		default:
			t.Fatalf("allowed scheme %q", u.Scheme)
		}
		for _, seg := range strings.Split(u.Path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("allowed %q with a dot segment (decoded path %q)", uri, u.Path)
			}
		}
		if !registeredRedirect([]string{uri}, uri) {
			t.Fatalf("%q is not found among the URIs it was registered as", uri)
		}
	})
}
