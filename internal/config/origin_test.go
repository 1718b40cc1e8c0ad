package config

import "testing"

func TestOriginAllowed(t *testing.T) {
	defaults := Defaults()
	listed := Gateway{AllowedOrigins: []string{
		"https://claude.ai",
		"http://example.com:8080",
		"https://secure.example:443",
		"vscode-webview://abc",
	}}
	all := Gateway{AllowedOrigins: []string{"https://claude.ai", "*"}}
	none := Gateway{AllowedOrigins: []string{}}
	// The gateway's own public origin is allowed whatever the list says.
	public := Gateway{AllowedOrigins: []string{}, Auth: &Auth{PublicURL: "https://mcp.example.com/gw"}}
	publicPort := Defaults()
	publicPort.Auth = &Auth{PublicURL: "http://gw.example:8080"}

	tests := []struct {
		g      *Gateway
		origin string
		want   bool
	}{
		// No Origin header: not a browser, nothing to check.
		{&defaults, "", true},
		{&none, "", true},

		{&defaults, "http://localhost", true},
		{&defaults, "http://localhost:3000", true},
		{&defaults, "https://localhost:8443", true},
		{&defaults, "http://127.0.0.1:6274", true},
		{&defaults, "http://[::1]:5173", true},
		{&defaults, "HTTP://LocalHost:80", true},
		{&defaults, "http://localhost:3000/", true},
		{&defaults, "https://evil.example", false},
		{&defaults, "http://localhost.evil.example", false},
		{&defaults, "http://127.0.0.2", false},
		{&defaults, "ws://localhost", false},
		{&defaults, "null", false},
		{&defaults, "localhost", false},
		{&defaults, "http://localhost/path", false},
		{&defaults, "http://user@localhost", false},
		{&defaults, "%%", false},

		{&listed, "https://claude.ai", true},
		{&listed, "https://claude.ai:444", true}, // no port in the entry: any port
		{&listed, "http://claude.ai", false},     // scheme matters
		{&listed, "http://example.com:8080", true},
		{&listed, "http://example.com", false}, // entry has a port: only that one
		{&listed, "http://example.com:8081", false},
		{&listed, "https://secure.example", true}, // 443 is https's default
		{&listed, "https://secure.example:8443", false},
		{&listed, "vscode-webview://abc", true},
		{&listed, "http://localhost", false}, // the list replaces the defaults

		{&all, "https://anything.example", true},
		{&all, "null", true},
		{&none, "http://localhost", false},

		{&public, "https://mcp.example.com", true},
		{&public, "HTTPS://MCP.example.com:443/", true},
		{&public, "http://mcp.example.com", false},       // scheme matters
		{&public, "https://mcp.example.com:8443", false}, // so does the port
		{&public, "https://evil.mcp.example.com", false},
		{&public, "https://mcp.example.com.evil", false},
		{&public, "null", false},
		{&publicPort, "http://gw.example:8080", true},
		{&publicPort, "http://gw.example", false},
		{&publicPort, "http://localhost:3000", true}, // the defaults still apply
	}
	for _, tt := range tests {
		if got := tt.g.OriginAllowed(tt.origin); got != tt.want {
			t.Errorf("OriginAllowed(%q) with %q = %v, want %v", tt.origin, tt.g.AllowedOrigins, got, tt.want)
		}
	}
}
