package e2e

import (
	"net/http"
	"os"
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

// TestOAuthServerRedirectPolicyNarrowed: a redirect URI the policy allowed when its client
// registered, and no longer allows (gateway.auth.server.redirectUris narrowed, gateway
// restarted on the same state file), is refused at /authorize with a 400 page: the policy
// holds at every authorization, not only at registration (design21: every redirect URI passes
// clients.redirectAllowed). A loopback one of the same client still works.
func TestOAuthServerRedirectPolicyNarrowed(t *testing.T) {
	requirePeers(t, everythingServer)
	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	const app = "https://app.example.com/callback"
	cfg := authGatewayConfig(t, base, map[string]any{"redirectUris": []string{app}})
	cfg.Gateway["listen"] = addr
	gw := &gatewayReplica{name: "mcpgate", addr: addr, path: writeGatewayConfig(t, cfg)}
	gw.start(t)
	c := publicClient(t, fetchASMetadata(t, base), app, loopbackRedirect)
	resource := base + "/servers/everything/mcp"
	_, challenge := newPKCE()
	if p := newUserAgent(t).open(t, c.authorizeURL(resource, challenge, nil), base); p.status != http.StatusOK {
		t.Fatalf("authorization to %s while allowed: %d, want the sign-in page", app, p.status)
	}

	gw.p.stop(t, syscall.SIGTERM, gatewayStopTimeout, true)
	as := cfg.Gateway["auth"].(map[string]any)["server"].(map[string]any)
	delete(as, "redirectUris") // back to the default: Claude's callbacks and loopback
	if err := os.WriteFile(gw.path, mustJSON(t, cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	gw.start(t)

	if p := newUserAgent(t).get(t, c.authorizeURL(resource, challenge, nil)); p.status != http.StatusBadRequest || p.location != nil {
		t.Errorf("authorization to %s once the policy no longer allows it: %d (Location %v), want a 400 page", app, p.status, p.location)
	}
	local := c
	local.redirect = loopbackRedirect
	if tok := local.grant(t, resource); bearerStatus(t, resource, tok.AccessToken) != http.StatusOK {
		t.Error("the same client's loopback redirect after the restart is refused")
	}
}
