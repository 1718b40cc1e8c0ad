package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestHostCheck(t *testing.T) {
	tests := []struct {
		name    string
		listen  string
		allowed []string
		domain  string
		public  string
		nilFunc bool
		ok, bad []string
	}{
		{name: "loopback listener", listen: "127.0.0.1:8080",
			ok:  []string{"localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "app.localhost", "localhost."},
			bad: []string{"evil.example", "attacker.com", "10.0.0.1", "localhost.evil.example", "", "0.0.0.0"}},
		{name: "localhost listener", listen: "localhost:8080", ok: []string{"localhost"}, bad: []string{"evil.example"}},
		{name: "ipv6 loopback listener", listen: "[::1]:8080", ok: []string{"::1"}, bad: []string{"evil.example"}},
		{name: "loopback plus allowed", listen: "127.0.0.1:8080", allowed: []string{"MCP.example.com", "[fd00::1]"},
			ok: []string{"mcp.example.com", "localhost", "fd00::1"}, bad: []string{"evil.example", "x.mcp.example.com"}},
		{name: "loopback with host routing", listen: "127.0.0.1:8080", domain: "mcp.example.com",
			ok: []string{"memory.mcp.example.com", "mcp.example.com"}, bad: []string{"evil.example", "xmcp.example.com"}},
		{name: "every interface", listen: ":8080", nilFunc: true},
		{name: "public address", listen: "192.0.2.1:8080", nilFunc: true},
		{name: "public address with allowed", listen: "0.0.0.0:8080", allowed: []string{"mcp.example.com"},
			ok: []string{"mcp.example.com", "localhost"}, bad: []string{"evil.example"}},
		{name: "star", listen: "127.0.0.1:8080", allowed: []string{"*"}, nilFunc: true},
		{name: "loopback behind a proxy keeping Host", listen: "127.0.0.1:8080", public: "https://MCP.example.com/base",
			ok: []string{"mcp.example.com", "localhost", "mcp.example.com."}, bad: []string{"evil.example", "x.mcp.example.com"}},
		{name: "public URL with port", listen: "127.0.0.1:8080", public: "https://[fd00::2]:8443",
			ok: []string{"fd00::2", "[fd00::2]"}, bad: []string{"fd00::3"}},
		{name: "public URL never restricts an open listener", listen: "0.0.0.0:8080", public: "https://mcp.example.com", nilFunc: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := hostCheck(tt.listen, tt.allowed, tt.domain, tt.public)
			if (f == nil) != tt.nilFunc {
				t.Fatalf("hostCheck nil = %v, want %v", f == nil, tt.nilFunc)
			}
			for _, h := range tt.ok {
				if !f(h) {
					t.Errorf("host %q refused", h)
				}
			}
			for _, h := range tt.bad {
				if f(h) {
					t.Errorf("host %q allowed", h)
				}
			}
		})
	}
}

// TestForeignHostRefusedOnLoopback: on a loopback listener a request with a
// foreign Host (a DNS rebinding page sends its own name) is refused, while
// a name in gateway.allowedHosts is served.
func TestForeignHostRefusedOnLoopback(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.AllowedHosts = []string{"mcp.internal.example"}
	g := startGateway(t, cfg)
	for host, want := range map[string]bool{"evil.example": false, "mcp.internal.example": true, "localhost": true} {
		c := g.client("fake")
		req := c.request(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		req.Host = host
		r := c.do(t, req, nil)
		if refused := r.Status == http.StatusForbidden; refused == want {
			t.Errorf("Host %s: status %d (body %s), want allowed=%v", host, r.Status, r.Body, want)
		}
	}
}

// TestPublicURLHostAllowedBehindProxy: the connector recipe (docs/auth.md), a
// loopback gateway with gateway.auth.publicUrl behind a TLS proxy that
// keeps the public Host, is served without listing the host in
// allowedHosts; a Host that is still refused is told which keys to set.
func TestPublicURLHostAllowedBehindProxy(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Auth = config.NewAuth()
	cfg.Gateway.Auth.Required = false
	cfg.Gateway.Auth.PublicURL = "https://mcp.example.com"
	g := startGateway(t, cfg)
	c := g.client("fake")
	req := c.request(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	req.Host = "mcp.example.com"
	req.Header.Set("X-Forwarded-Proto", "https")
	if r := c.do(t, req, nil); r.Status != http.StatusOK {
		t.Fatalf("Host mcp.example.com (the publicUrl's): status %d, body %s", r.Status, r.Body)
	}
	req = c.request(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	req.Host = "other.example.com"
	r := c.do(t, req, nil)
	if r.Status != http.StatusForbidden {
		t.Fatalf("Host other.example.com: status %d, want 403", r.Status)
	}
	for _, want := range []string{`\"other.example.com\"`, "gateway.allowedHosts", "gateway.auth.publicUrl"} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("403 body %s does not name %s", r.Body, want)
		}
	}
}
