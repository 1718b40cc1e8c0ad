package e2e

import (
	"net/http"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestOAuthServerRestart: what a person did survives a restart of the gateway (its state file,
// no key ring configured: the signing key comes from the store's seed). A client registered
// before, and its grant: the access token is still accepted, the refresh token still refreshes,
// the client can be authorized again without registering. A grant revoked before the restart
// stays revoked: its access token refused, its refresh token too.
func TestOAuthServerRestart(t *testing.T) {
	requirePeers(t, everythingServer)
	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	cfg := authGatewayConfig(t, base, nil)
	cfg.Gateway["listen"] = addr
	gw := &gatewayReplica{name: "mcpgate", addr: addr, path: writeGatewayConfig(t, cfg)}
	gw.start(t)
	meta := fetchASMetadata(t, base)
	c := publicClient(t, meta, loopbackRedirect)
	resource := base + "/servers/everything/mcp"
	kept := c.grant(t, resource)
	revoked := c.grant(t, resource)
	if s := revoke(t, c, revoked.RefreshToken, "refresh_token"); s != http.StatusOK {
		t.Fatalf("revocation: %d", s)
	}

	gw.p.stop(t, syscall.SIGTERM, gatewayStopTimeout, true)
	gw.start(t)

	if s := bearerStatus(t, resource, kept.AccessToken); s != http.StatusOK {
		t.Errorf("an access token from before the restart: %d, want 200", s)
	}
	if r := c.refresh(t, kept.RefreshToken); r.status != http.StatusOK || r.AccessToken == "" {
		t.Errorf("a refresh token from before the restart: %d: %s", r.status, r.body)
	} else if s := bearerStatus(t, resource, r.AccessToken); s != http.StatusOK {
		t.Errorf("the access token of that refresh: %d, want 200", s)
	}
	if s := bearerStatus(t, resource, revoked.AccessToken); s != http.StatusUnauthorized {
		t.Errorf("an access token of a grant revoked before the restart: %d, want 401", s)
	}
	if r := c.refresh(t, revoked.RefreshToken); r.status != http.StatusBadRequest {
		t.Errorf("a refresh token of a grant revoked before the restart: %d: %s; want 400", r.status, r.body)
	}
	// The client is still registered: a new authorization works without registering again.
	if tok := c.grant(t, resource); bearerStatus(t, resource, tok.AccessToken) != http.StatusOK {
		t.Error("a new grant of the client registered before the restart is refused")
	}
}
