package e2e

import (
	"net/http"
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The built-in authorization server (gateway.auth.server) across replicas sharing Redis: every
// step of a person's flow lands on another replica (the round-robin proxy), replicas die and
// come back, the seal keys rotate, Redis stops. Each test logs its figures as FIGURES.

// TestOAuthClusterFlow: register, authorize, sign in, consent, token, tools/call, refresh and
// tools/call with the new token, each on another replica; then the first refresh token is
// presented again, to another replica than the one that rotated it: reuse, so the grant is
// revoked, and the access token of the grant, accepted by every replica before, is refused by
// every replica once the revocation's pub/sub message has reached it (waited for by polling
// each replica, not by a sleep).
func TestOAuthClusterFlow(t *testing.T) {
	c := startAuthCluster(t, 3, "")
	client := publicClient(t, c.meta, loopbackRedirect)
	first := client.grant(t, c.resource)
	sid := openSession(t, c.resource, "Bearer "+first.AccessToken)
	echoCall(t, c.resource, first.AccessToken, sid, "before the refresh")

	second := client.refresh(t, first.RefreshToken)
	if second.status != http.StatusOK || second.AccessToken == "" || second.RefreshToken == "" || second.RefreshToken == first.RefreshToken {
		t.Fatalf("refresh: %d: %s; want new tokens", second.status, second.body)
	}
	// The session opened with the first token goes on with the second (same user, same client).
	echoCall(t, c.resource, second.AccessToken, sid, "after the refresh")
	if got := c.statusOnEach(t, second.AccessToken); !allAre(got, http.StatusOK) {
		t.Fatalf("the refreshed access token on each replica: %v, want 200 everywhere", got)
	}

	reuse := client.refresh(t, first.RefreshToken)
	if reuse.status != http.StatusBadRequest || reuse.Error != "invalid_grant" {
		t.Fatalf("the rotated refresh token presented again: %d: %s; want 400 invalid_grant", reuse.status, reuse.body)
	}
	var last []int
	testkit.WaitFor(t, "every replica to refuse the access token of the revoked grant", func() bool {
		got := c.probeOnEach(t, second.AccessToken)
		if !slices.Equal(got, last) {
			t.Logf("the access token of the revoked grant on each replica: %v", got)
			last = got
		}
		return allAre(got, http.StatusUnauthorized)
	})
	if r := client.refresh(t, second.RefreshToken); r.status != http.StatusBadRequest || r.Error != "invalid_grant" {
		t.Errorf("the newest refresh token of the revoked grant: %d: %s; want 400 invalid_grant", r.status, r.body)
	}
	// The user can authorize the client again: a new grant, accepted everywhere.
	again := client.grant(t, c.resource)
	if got := c.statusOnEach(t, again.AccessToken); !allAre(got, http.StatusOK) {
		t.Errorf("a new grant after the revocation, on each replica: %v, want 200", got)
	}
	t.Logf("FIGURES flow across 3 replicas: %d requests proxied, 0 failed", c.proxied())
}
