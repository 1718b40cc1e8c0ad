package gateway

import (
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/internal/mcptest"
)

func TestHostCheck(t *testing.T) {
	tests := []struct {
		name    string
		listen  string
		allowed []string
		domain  string
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := hostCheck(tt.listen, tt.allowed, tt.domain)
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
	cfg := newConfig(fakeServer("fake", mcptest.FakeOptions{}))
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
