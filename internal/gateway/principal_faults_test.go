package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A reload takes the scope "admin" from alice's API key while her
// endpoint session lives on (the endpoint is not rebuilt: its servers and
// their policies did not change, and the front lets her key, of the same
// name, into the session). Her next list through the endpoint no longer
// shows the member's admin tool, and her call of it is refused, as at the
// server's own URL. On the old code the endpoint kept the principal the
// session was opened with: the tool stayed listed and callable.
func TestEndpointMemberPolicyFollowsReloadedKey(t *testing.T) {
	opts := testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"admin_1", "open_1"}}}
	cfg := newConfig(fakeServer("p", opts))
	cfg.Servers["p"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyAllow, Scopes: []string{"admin"}},
		{Effect: config.PolicyDeny, Tools: []string{"admin_*"}},
	}}
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"p"})
	cfg.Gateway.Auth = config.NewAuth()
	sum := sha256.Sum256([]byte("key-of-alice"))
	cfg.Gateway.Auth.APIKeys = []config.APIKey{{Name: "alice", SHA256: hex.EncodeToString(sum[:]), Scopes: []string{"admin"}}}
	g, _ := startReloading(t, cfg, ReloadOptions{})

	c := g.endpointClient("all")
	c.header.Set("Authorization", "Bearer key-of-alice")
	c.connect(t)
	tools := func() []string {
		t.Helper()
		var names []string
		for _, tool := range toolNames(t, c) {
			if strings.HasSuffix(tool, "_1") {
				names = append(names, tool)
			}
		}
		return names
	}
	if got := tools(); !slices.Equal(got, []string{"p__admin_1", "p__open_1"}) {
		t.Fatalf("with the scope: %v", got)
	}

	next := cloneConfig(cfg)
	auth := *cfg.Gateway.Auth
	auth.APIKeys = []config.APIKey{{Name: "alice", SHA256: hex.EncodeToString(sum[:]), Scopes: []string{"read"}}}
	next.Gateway.Auth = &auth
	if err := g.gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	if got := tools(); !slices.Equal(got, []string{"p__open_1"}) {
		t.Errorf("the scope taken by a reload: %v, want p__open_1 only", got)
	}
	if m := c.post(t, callBody("2", "p__admin_1", map[string]string{}, "")).final(t); m.Error == nil {
		t.Errorf("the scope taken by a reload: p__admin_1 called: %s", m.Result)
	}
}
