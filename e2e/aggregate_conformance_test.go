package e2e

import "testing"

// TestConformanceEndpoint runs every conformance suite (stable, alpha, the 2025-11-25 and the
// 2026-07-28 requirement sets: both eras) through an aggregating endpoint whose only member is
// the Go SDK's conformance server with "prefix": "", at /endpoints/conf/mcp and through the
// default endpoint at /mcp. Names are then the server's own, so the endpoint must be as
// conformant as the server behind /servers/everything/mcp (TestConformance/shared): every
// suite passes 100%, with no expected failures.
func TestConformanceEndpoint(t *testing.T) {
	requirePeers(t, node22, everythingServer, conformanceJS["stable"], conformanceJS["alpha"])
	base := startGateway(t, map[string]any{
		"mcpServers": map[string]any{
			"everything": map[string]any{"command": everythingServer, "prefix": ""},
		},
		"gateway": map[string]any{"endpoints": map[string]any{
			"conf": map[string]any{"servers": []string{"everything"}},
		}},
	})
	for _, ep := range []struct{ name, path string }{{"endpoint", "/endpoints/conf/mcp"}, {"default", "/mcp"}} {
		t.Run(ep.name, func(t *testing.T) {
			for _, s := range suites {
				t.Run(s.name, func(t *testing.T) {
					runConformance(t, s, base+ep.path, "")
				})
			}
		})
	}
}
