package authserver

import (
	"net/http"
	"net/url"
	"testing"
)

// TestRevoke: a client revokes by its refresh token or by an access
// token; either ends the grant (the access token refused at once, the
// refresh token failing). Unknown tokens and other clients' tokens get
// 200 and change nothing.
func TestRevoke(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	revoke := func(token string, client url.Values, basic *[2]string) {
		t.Helper()
		form := url.Values{"token": {token}}
		for k, v := range client {
			form[k] = v
		}
		if status, body := w.post("/oauth/revoke", form, basic); status != http.StatusOK {
			t.Fatalf("revoke: %d %v", status, body)
		}
	}
	public := url.Values{"client_id": {appID}}

	t.Run("refresh token", func(t *testing.T) {
		access, refresh := w.tokens()
		revoke(refresh, public, nil)
		w.wantRefused(access, memoryURL, "revoked")
		if status, body := w.refresh(refresh, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("refresh after revoke: %d %v", status, body)
		}
	})
	t.Run("access token", func(t *testing.T) {
		access, refresh := w.tokens()
		revoke(access, url.Values{"client_id": {appID}, "token_type_hint": {"refresh_token"}}, nil) // a wrong hint is only a hint
		w.wantRefused(access, memoryURL, "revoked")
		if status, _ := w.refresh(refresh, nil); status != http.StatusBadRequest {
			t.Fatalf("refresh after revoking the access token: %d", status)
		}
	})
	t.Run("unknown and other client's", func(t *testing.T) {
		access, refresh := w.tokens()
		revoke("not-a-token", public, nil)
		revoke("a.b.c", public, nil)
		revoke(refresh, nil, &[2]string{confID, confSec}) // another client's
		revoke(access, nil, &[2]string{confID, confSec})
		w.wantAccepted(access, memoryURL)
		if status, body := w.refresh(refresh, nil); status != http.StatusOK {
			t.Fatalf("refresh after others' revocations: %d %v", status, body)
		}
	})
	t.Run("client authentication", func(t *testing.T) {
		if status, body := w.post("/oauth/revoke", url.Values{"token": {"x"}}, &[2]string{confID, "wrong"}); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
			t.Fatalf("wrong secret: %d %v", status, body)
		}
		if status, body := w.post("/oauth/revoke", url.Values{"client_id": {appID}}, nil); status != http.StatusBadRequest || body["error"] != "invalid_request" {
			t.Fatalf("no token: %d %v", status, body)
		}
	})
}
