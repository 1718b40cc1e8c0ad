package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

// TestOAuthClusterReplicaCrash: a replica killed (SIGKILL) between the sign-in it served and
// the consent: the flow goes on on the others (the authorization request is in Redis, the
// sign-in cookie is sealed with the shared ring). Then, the tokens issued, another replica is
// killed: the tokens keep working on the two left, a refresh too; restarted, both replicas
// accept them.
func TestOAuthClusterReplicaCrash(t *testing.T) {
	c := startAuthCluster(t, 3, "")
	client := publicClient(t, c.meta, loopbackRedirect)
	issuer := c.meta.Issuer
	verifier, challenge := newPKCE()
	ua := newUserAgent(t)
	login := ua.open(t, client.authorizeURL(c.resource, challenge, nil), issuer)
	if login.status != http.StatusOK {
		t.Fatalf("authorization request: %d: %s", login.status, brief(login.body))
	}
	signedIn := ua.signIn(t, login, e2eUser, e2ePassword, issuer)
	if signedIn.status != http.StatusSeeOther || signedIn.location == nil {
		t.Fatalf("sign-in: %d, want 303 to the consent page: %s", signedIn.status, brief(signedIn.body))
	}
	signInOn := c.lastOpenedOn()
	c.replicas[signInOn].kill9(t)
	consent := ua.open(t, signedIn.location.String(), issuer)
	if consent.status != http.StatusOK {
		t.Fatalf("consent page after the sign-in's replica r%d died: %d: %s", signInOn, consent.status, brief(consent.body))
	}
	tok := client.redeem(t, client.codeOf(t, ua.decide(t, consent, "allow", issuer)), verifier, c.resource)
	if tok.status != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("token request after the sign-in's replica r%d died: %d: %s", signInOn, tok.status, tok.body)
	}
	echoCall(t, c.resource, tok.AccessToken, openSession(t, c.resource, "Bearer "+tok.AccessToken), "after a crash mid-login")
	c.replicas[signInOn].start(t)

	dead := (signInOn + 1) % len(c.replicas)
	c.replicas[dead].kill9(t)
	// Each initialize lands on another live replica (the proxy skips the dead one).
	for i := range 2 * len(c.replicas) {
		if s := bearerStatus(t, c.resource, tok.AccessToken); s != http.StatusOK {
			t.Fatalf("initialize %d with the access token, r%d dead: %d", i, dead, s)
		}
	}
	next := client.refresh(t, tok.RefreshToken)
	if next.status != http.StatusOK || next.AccessToken == "" {
		t.Fatalf("refresh with r%d dead: %d: %s", dead, next.status, next.body)
	}
	c.replicas[dead].start(t)
	for _, access := range []string{tok.AccessToken, next.AccessToken} {
		if got := c.statusOnEach(t, access); !allAre(got, http.StatusOK) {
			t.Errorf("an access token issued before the restarts, on each replica: %v, want 200", got)
		}
	}
	t.Logf("FIGURES crash of r%d after sign-in, of r%d after the tokens: %d requests proxied, 0 failed", signInOn, dead, c.proxied())
}

// TestOAuthClusterKeyRotation: the seal key file rotates (add k2, promote k2, retire k1, as
// TestClusterKeyRotation) while a client uses an access token signed by k1 without pause.
// Through add and promote every replica accepts it, no request refused; the tokens issued after the promotion are signed by k2.
// At the retirement the k1 token is refused by every replica as soon as each has reloaded the
// keys: there is no grace for it (its key is gone from the ring, and with it from the gate's
// keys); its refresh token, opaque and in Redis, is unaffected and brings a k2 token, which
// every replica accepts.
func TestOAuthClusterKeyRotation(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "seal.json")
	k1 := newSealKey("k1", true)
	writeSealKeys(t, keys, k1)
	c := startAuthCluster(t, 3, keys)
	client := publicClient(t, c.meta, loopbackRedirect)
	old := client.grant(t, c.resource)
	if kid := tokenKeyID(t, old.AccessToken); kid != "k1" {
		t.Fatalf("an access token signed by %q, want k1", kid)
	}
	reloaded := func(n int32) {
		t.Helper()
		testkit.WaitFor(t, fmt.Sprintf("every replica to reload the keys (%d)", n), func() bool {
			for _, r := range c.replicas {
				if r.keysLoaded.Load() < n {
					return false
				}
			}
			return true
		})
	}
	checks := 0
	acceptedEverywhere := func(step, tok string) {
		t.Helper()
		checks += len(c.replicas)
		if got := c.statusOnEach(t, tok); !allAre(got, http.StatusOK) {
			t.Errorf("%s: the access token on each replica: %v, want 200", step, got)
		}
	}
	// A client keeps using the k1 token through add and promote.
	traffic := startTokenTraffic(c.resource, old.AccessToken)
	k2 := newSealKey("k2", false)
	writeSealKeys(t, keys, k1, k2) // add
	reloaded(1)
	acceptedEverywhere("k2 added", old.AccessToken)
	k1.Primary, k2.Primary = false, true
	writeSealKeys(t, keys, k1, k2) // promote
	reloaded(2)
	acceptedEverywhere("k2 promoted", old.AccessToken)
	fresh := client.grant(t, c.resource)
	if kid := tokenKeyID(t, fresh.AccessToken); kid != "k2" {
		t.Errorf("an access token issued after the promotion is signed by %q, want k2", kid)
	}
	acceptedEverywhere("k2 promoted, a token of k2", fresh.AccessToken)
	requests, failed, first := traffic.end()
	t.Logf("FIGURES key rotation (add, promote) under a client's traffic: %d requests with the k1 token, %d failed (first: %v)", requests, failed, first)
	if requests == 0 || failed > 0 {
		t.Errorf("%d of %d requests with the k1 token failed during add and promote (first: %v)", failed, requests, first)
	}

	writeSealKeys(t, keys, k2) // retire k1
	reloaded(3)
	if got := c.probeOnEach(t, old.AccessToken); !allAre(got, http.StatusUnauthorized) {
		t.Errorf("k1 retired: the k1 access token on each replica: %v, want 401 everywhere", got)
	}
	next := client.refresh(t, old.RefreshToken)
	if next.status != http.StatusOK || next.AccessToken == "" {
		t.Fatalf("k1 retired: refresh of the k1 token's grant: %d: %s", next.status, next.body)
	}
	if kid := tokenKeyID(t, next.AccessToken); kid != "k2" {
		t.Errorf("the access token of a refresh after the retirement is signed by %q, want k2", kid)
	}
	acceptedEverywhere("k1 retired, the refreshed token", next.AccessToken)
	acceptedEverywhere("k1 retired, the token issued after the promotion", fresh.AccessToken)
	t.Logf("FIGURES key rotation: %d token checks on the replicas, %d requests proxied, 0 failed", checks, c.proxied())
}

// cleanlyUnavailable reports whether an answer is the clean failure of a request that needs
// Redis while it is down: a 503, or an OAuth error temporarily_unavailable; never a 500, never
// a stack.
func cleanlyUnavailable(status int, body string) bool {
	if strings.Contains(body, "goroutine ") || strings.Contains(body, "panic") {
		return false
	}
	return status == http.StatusServiceUnavailable ||
		(status == http.StatusBadRequest && strings.Contains(body, `"temporarily_unavailable"`))
}

// TestOAuthClusterRedisDown: Redis stops (SIGKILL). The access tokens issued before keep
// working on every replica (checked in process: the ring's keys, the revocations in memory);
// what needs Redis fails cleanly: the sign-in of a login begun before, a new authorization
// request, a refresh, a registration. A replica restarted meanwhile starts, refusing tokens
// until it has read the revoked set from Redis. Redis started again (the testkit's Redis keeps nothing
// on disk: it comes back empty, every client and grant gone, as any Redis without
// persistence): a new registration and flow work on every replica; the old access token still
// verifies (a JWT of the ring, not revoked), its client is unknown (invalid_client).
//
// A lookup the Store cannot make is answered 503 temporarily_unavailable (with Retry-After),
// never as an unknown client or a bad token: a client told invalid_client may drop its
// registration (internal/authserver TestStoreOutageIsTemporary).
func TestOAuthClusterRedisDown(t *testing.T) {
	c := startAuthCluster(t, 3, "")
	issuer := c.meta.Issuer
	client := publicClient(t, c.meta, loopbackRedirect)
	tok := client.grant(t, c.resource)
	_, challenge := newPKCE()
	ua := newUserAgent(t)
	login := ua.open(t, client.authorizeURL(c.resource, challenge, nil), issuer)
	if login.status != http.StatusOK {
		t.Fatalf("authorization request: %d: %s", login.status, brief(login.body))
	}

	c.redis.Stop()
	if got := c.statusOnEach(t, tok.AccessToken); !allAre(got, http.StatusOK) {
		t.Errorf("Redis down: an access token issued before, initialize on each replica: %v, want 200", got)
	}
	failures := 0
	check := func(what string, status int, body string) {
		t.Helper()
		failures++
		if !cleanlyUnavailable(status, body) {
			t.Errorf("Redis down: %s: %d: %s; want a 503 or temporarily_unavailable", what, status, brief(body))
		} else {
			t.Logf("Redis down: %s: %d, a clean failure", what, status)
		}
	}
	signedIn := ua.signIn(t, login, e2eUser, e2ePassword, issuer)
	check("the sign-in of a login begun before", signedIn.status, signedIn.body)
	again := ua.get(t, client.authorizeURL(c.resource, challenge, nil))
	if again.location != nil && origin(again.location) != issuer {
		// An error sent to the client's redirect URI (RFC 6749 4.1.2.1).
		q := again.location.Query()
		if e := q.Get("error"); e != "temporarily_unavailable" {
			t.Errorf("Redis down: a new authorization request: redirect %s, want error=temporarily_unavailable", again.location)
		}
		failures++
	} else {
		check("a new authorization request", again.status, again.body)
	}
	r := client.refresh(t, tok.RefreshToken)
	check("a refresh", r.status, r.body)
	status, body, _ := registerClient(t, c.meta, map[string]any{"client_name": "while-down", "redirect_uris": []string{loopbackRedirect}, "token_endpoint_auth_method": "none"})
	check("a registration", status, body)

	// A replica restarted while Redis is down starts (Redis is optional), and refuses the
	// access tokens it cannot know were not revoked; the others go on accepting them.
	c.replicas[2].restart(t)
	if got := c.probeOnEach(t, tok.AccessToken); got[0] != http.StatusNotFound || got[1] != http.StatusNotFound || got[2] != http.StatusUnauthorized {
		t.Errorf("Redis down, r2 restarted: the token from before on each replica: %v, want accepted (404, no session) on r0 and r1, refused (401) on r2", got)
	}

	c.redis.Start()
	testkit.WaitFor(t, "r2, started while Redis was down, to accept the token once Redis is back", func() bool {
		return c.probeOnEach(t, tok.AccessToken)[2] == http.StatusNotFound
	})
	var fresh oauthClient
	testkit.WaitFor(t, "a registration to succeed once Redis is back", func() bool {
		var status int
		status, _, fresh = registerClient(t, c.meta, map[string]any{"client_name": "after", "redirect_uris": []string{loopbackRedirect}, "token_endpoint_auth_method": "none"})
		return status == http.StatusCreated
	})
	// The Redis client of each replica may answer its last dial error for a second more
	// (503 with Retry-After meanwhile): a new authorization request answered by every replica
	// in turn (three in a row through the round-robin proxy) says each reads Redis again.
	_, freshChallenge := newPKCE()
	inARow := 0
	testkit.WaitFor(t, "an authorization request of the new client to work on every replica", func() bool {
		if p := newUserAgent(t).get(t, fresh.authorizeURL(c.resource, freshChallenge, nil)); p.status == http.StatusSeeOther {
			inARow++
		} else {
			inARow = 0
		}
		return inARow == len(c.replicas)
	})
	next := fresh.grant(t, c.resource)
	if got := c.statusOnEach(t, next.AccessToken); !allAre(got, http.StatusOK) {
		t.Errorf("Redis back: a new grant's access token on each replica: %v, want 200", got)
	}
	if got := c.statusOnEach(t, tok.AccessToken); !allAre(got, http.StatusOK) {
		t.Errorf("Redis back: the access token from before on each replica: %v, want 200", got)
	}
	// The client itself went with Redis's data: its refresh is refused as of an unknown client.
	if r := client.refresh(t, tok.RefreshToken); r.status != http.StatusUnauthorized || r.Error != "invalid_client" {
		t.Errorf("Redis back empty: the refresh of a client from before: %d: %s; want 401 invalid_client", r.status, r.body)
	}
	t.Logf("FIGURES Redis down: %d requests needing Redis, each answered; %d requests proxied in all", failures, c.proxied())
}

// TestOAuthServerRestartSealKeys is TestOAuthServerRestart (oauth_restart_test.go: one
// gateway, its state file, no seal keys: the signing key from the Store's seed) with seal keys
// configured: the access token issued before the restart is signed by the ring's key (kid k1)
// and verifies after it; its refresh token refreshes after it.
func TestOAuthServerRestartSealKeys(t *testing.T) {
	requirePeers(t, everythingServer)
	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	cfg := authGatewayConfig(t, base, nil)
	cfg.Gateway["listen"] = addr
	cfg.Gateway["sealKeyFile"] = sealKeyFile(t)
	gw := &gatewayReplica{name: "mcpgate", addr: addr, path: writeGatewayConfig(t, cfg)}
	gw.start(t)
	meta := fetchASMetadata(t, base)
	c := publicClient(t, meta, loopbackRedirect)
	resource := base + "/servers/everything/mcp"
	tok := c.grant(t, resource)
	if kid := tokenKeyID(t, tok.AccessToken); kid != "k1" {
		t.Errorf("an access token signed by %q, want the seal key k1", kid)
	}

	gw.p.stop(t, syscall.SIGTERM, gatewayStopTimeout, true)
	gw.start(t)

	if s := bearerStatus(t, resource, tok.AccessToken); s != http.StatusOK {
		t.Errorf("an access token from before the restart: %d, want 200", s)
	}
	r := c.refresh(t, tok.RefreshToken)
	if r.status != http.StatusOK || r.AccessToken == "" {
		t.Fatalf("a refresh token from before the restart: %d: %s", r.status, r.body)
	}
	if s := bearerStatus(t, resource, r.AccessToken); s != http.StatusOK {
		t.Errorf("the access token of that refresh: %d, want 200", s)
	}
}
