package gateway

import (
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// TestEndpointKeysChanged: a running endpoint takes a change of its
// servers, auth and policy in place; every other key rebuilds it, the
// list keys (pageSize, maxListBytes, which its sessions' views and pages
// are made with) included, named by their JSON keys.
func TestEndpointKeysChanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*config.Endpoint)
		want []string
	}{
		{"nothing", func(*config.Endpoint) {}, nil},
		{"servers", func(ep *config.Endpoint) { ep.Servers = append(ep.Servers, "b") }, nil},
		{"policy", func(ep *config.Endpoint) { ep.Policy = &config.Policy{} }, nil},
		{"separator", func(ep *config.Endpoint) { ep.Separator = "." }, []string{"separator"}},
		{"pageSize", func(ep *config.Endpoint) { ep.PageSize = 50 }, []string{"pageSize"}},
		{"maxListBytes", func(ep *config.Endpoint) { ep.MaxListBytes = 1 << 20 }, []string{"maxListBytes"}},
	} {
		old := config.NewEndpoint("all", []string{"a"})
		ep := config.NewEndpoint("all", []string{"a"})
		tc.edit(ep)
		if got := endpointKeysChanged(old, ep); !slices.Equal(got, tc.want) {
			t.Errorf("%s: keys %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := endpointKeysChanged(nil, config.NewEndpoint("all", nil)); got != nil {
		t.Errorf("a new endpoint: keys %q, want none", got)
	}
}
