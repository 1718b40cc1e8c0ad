package authserver

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attacks on the token endpoint by a client that reads the code.

// TestRefusedRefreshKeepsItsToken: a refresh asking for a wider scope or
// another resource is refused before the token rotates, so the client
// keeps its refresh token and its grant; a stray or hostile parameter
// costs the user nothing.
func TestRefusedRefreshKeepsItsToken(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	access, r := w.tokens()
	for _, tc := range []struct {
		name  string
		extra url.Values
		want  string
	}{
		{"wider scope", url.Values{"scope": {"mcp admin"}}, "invalid_scope"},
		{"other resource", url.Values{"resource": {filesURL}}, "invalid_target"},
		{"two resources", url.Values{"resource": {memoryURL, filesURL}}, "invalid_target"},
	} {
		if status, body := w.refresh(r, tc.extra); status != http.StatusBadRequest || body["error"] != tc.want {
			t.Fatalf("%s: %d %v, want %s", tc.name, status, body, tc.want)
		}
	}
	status, body := w.refresh(r, nil)
	if status != http.StatusOK {
		t.Fatalf("the refresh token after refused refreshes: %d %v, want it still good", status, body)
	}
	w.wantAccepted(access, memoryURL)
	w.wantAccepted(body["access_token"].(string), memoryURL)
}

// replayInside is a Store that runs hook once, inside the first PutGrant:
// the moment between a code's redemption (TakeCode) and the record of
// the grant it was redeemed for (CodeGrant).
type replayInside struct {
	Store
	hook func()
}

func (s *replayInside) PutGrant(ctx context.Context, g *Grant) error {
	if h := s.hook; h != nil {
		s.hook = nil
		h()
	}
	return s.Store.PutGrant(ctx, g)
}

// TestCodeReplayedMidRedemption: an attacker holding a stolen code
// redeems it; the client's own redemption (a replay, to the server)
// arrives before the grant is linked to the code. The replay must still
// end the attacker's grant: no tokens of it work.
func TestCodeReplayedMidRedemption(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC))
	store := &replayInside{Store: newMemStore(clk.Now, 10*time.Minute)}
	w := newWorld(t, nil, store, clk)
	code := w.code(authorizeParams())
	var replay map[string]any
	store.hook = func() { _, replay = w.redeem(code) }
	status, body := w.redeem(code)
	if replay["error"] != "invalid_grant" {
		t.Fatalf("the replay: %v, want invalid_grant", replay)
	}
	if status == http.StatusOK {
		w.wantRefused(body["access_token"].(string), memoryURL, "revoked")
		if status, body := w.refresh(body["refresh_token"].(string), nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("refresh of the first redemption's grant: %d %v, want invalid_grant", status, body)
		}
	} else if body["error"] != "invalid_grant" {
		t.Fatalf("the first redemption: %d %v, want its grant revoked or invalid_grant", status, body)
	}
}

// storeDown is a Store whose refresh token lookups fail, as a Redis
// Store's do while Redis is down.
type storeDown struct{ Store }

func (storeDown) RefreshGrant(context.Context, Hash) (*Grant, error) { return nil, ErrUnavailable }

// TestRevokeWhileStoreDown: a client revoking a refresh token while the
// Store cannot be asked must not be told the token is revoked (200): it
// would throw the token away believing it dead while it still works.
// RFC 7009 2.2.1 lets the server say it cannot now.
func TestRevokeWhileStoreDown(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC))
	mem := newMemStore(clk.Now, 10*time.Minute)
	w := newWorld(t, nil, storeDown{mem}, clk)
	_, refresh := w.tokens()
	status, body := w.post("/oauth/revoke", url.Values{"token": {refresh}, "client_id": {appID}}, nil)
	if status == http.StatusOK {
		t.Fatalf("revocation the Store could not make: 200 %v, want an error", body)
	}
	if g, err := mem.RefreshGrant(t.Context(), hashOf(refresh)); err != nil || mem.Revoked(g.ID) {
		t.Fatalf("the grant: %v %v, want it still live (the revocation was not made)", g, err)
	}
}

// TestRemovedUserLosesAccess: an operator who removes a user from the
// config (a lost laptop, a housemate moved out) and restarts expects
// that user's connectors to stop: their refresh tokens are refused and
// their grants revoked, and their access tokens refused by the gate at
// once, as the sign-in cookie of a removed user already is.
func TestRemovedUserLosesAccess(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	access, refresh := w.tokens()
	w.wantAccepted(access, memoryURL)

	cfg := testConfig()
	cfg.Users = []config.AuthUser{{Name: "bob"}}
	s, err := New(cfg, Deps{Store: w.store, Now: w.clk.Now, Resources: func() []string { return []string{memoryURL, filesURL} }})
	if err != nil {
		t.Fatal(err)
	}
	w.s, w.gate = s, newTestGate(t, s, w.clk)
	w.wantRefused(access, memoryURL, "revoked")
	if status, body := w.refresh(refresh, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("refresh of a removed user's grant: %d %v, want invalid_grant", status, body)
	}
}
