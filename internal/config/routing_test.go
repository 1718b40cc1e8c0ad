package config

import (
	"errors"
	"testing"
)

func TestHostRoutingAndProxyHeaders(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers":{"m":{"command":"x"}},"gateway":{"hostRouting":{"domain":"mcp.example.com"},"trustProxyHeaders":true}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.HostRouting.Domain != "mcp.example.com" || !cfg.Gateway.TrustProxyHeaders {
		t.Fatalf("gateway %+v", cfg.Gateway)
	}
	_, err = Parse([]byte(`{"mcpServers":{"m":{"command":"x"}},"gateway":{"hostRouting":{"domain":"https://x.com/","zone":1},"trustProxyHeaders":"yes"}}`), nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err %v", err)
	}
	want := map[string]bool{"gateway.hostRouting.domain": true, "gateway.hostRouting.zone": true, "gateway.trustProxyHeaders": true}
	for _, p := range ps {
		if !want[p.Path] {
			t.Errorf("unexpected problem %v", p)
		}
		delete(want, p.Path)
	}
	if len(want) != 0 {
		t.Fatalf("missing problems at %v (got %v)", want, ps)
	}
}
