package authserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// TestCodeFlow: authorize, consent (finish), redeem: an access token the
// gateway's gate accepts for its resource and refuses for another, with
// the claims of the design, and a refresh token.
func TestCodeFlow(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	req := w.stored(w.authorize(authorizeParams()))
	loc := w.consent(req, "alice")
	q := loc.Query()
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != appRedir || q.Get("state") != "st4te" || q.Get("iss") != issuer || len(q.Get("code")) != 43 {
		t.Fatalf("redirect %s: want %s with the code, state st4te and iss %s", loc, appRedir, issuer)
	}
	status, body := w.redeem(q.Get("code"))
	if status != http.StatusOK || body["token_type"] != "Bearer" || body["expires_in"] != float64(600) || body["scope"] != "mcp files" {
		t.Fatalf("token: %d %v", status, body)
	}
	access := body["access_token"].(string)
	w.wantAccepted(access, memoryURL)
	w.wantRefused(access, filesURL, "does not include "+filesURL)

	d := w.check(access, memoryURL)
	c := d.Principal.Claims
	if c["iss"] != issuer || c["sub"] != "alice" || c["client_id"] != appID || c["scope"] != "mcp files" ||
		c["gid"] == "" || c["jti"] == "" || c["exp"].(float64)-c["iat"].(float64) != 600 {
		t.Errorf("claims %v", c)
	}
	if aud, ok := c["aud"].([]any); !ok || len(aud) != 1 || aud[0] != memoryURL {
		// oidc.Audience writes a one-element audience as an array.
		if c["aud"] != memoryURL {
			t.Errorf("aud %v, want [%s]", c["aud"], memoryURL)
		}
	}
	tok, err := jose.ParseSigned(access, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	if h := tok.Signatures[0].Header; h.Algorithm != "EdDSA" || h.KeyID != seedKeyID || h.ExtraHeaders["typ"] != "at+jwt" {
		t.Errorf("header %+v, want EdDSA, kid seed, typ at+jwt", h)
	}
	grants, _ := w.store.Grants(t.Context())
	if len(grants) != 1 || grants[0].ID != c["gid"] || grants[0].Resource != memoryURL || grants[0].User != "alice" {
		t.Errorf("grants %+v", grants)
	}
	if _, err := w.store.AuthRequest(t.Context(), req.ID); err == nil {
		t.Error("the redeemed request is still stored")
	}
}

// TestCodeFlowConfidential: a confidential client authenticates with its
// secret by HTTP Basic; a wrong secret, or none, is invalid_client.
func TestCodeFlowConfidential(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	q := authorizeParams()
	q.Set("client_id", confID)
	code := w.code(q)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedir}, "code_verifier": {verifier}}
	if status, body := w.post("/oauth/token", form, &[2]string{confID, "wrong"}); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Fatalf("wrong secret: %d %v", status, body)
	}
	f2 := url.Values{"client_id": {confID}}
	for k, v := range form {
		f2[k] = v
	}
	if status, body := w.post("/oauth/token", f2, nil); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Fatalf("no secret: %d %v", status, body)
	}
	status, body := w.post("/oauth/token", form, &[2]string{confID, confSec})
	if status != http.StatusOK {
		t.Fatalf("right secret: %d %v", status, body)
	}
	w.wantAccepted(body["access_token"].(string), memoryURL)
	// Registered for Basic, the secret in the form is taken too.
	q.Set("state", "again")
	f3 := url.Values{"grant_type": {"authorization_code"}, "code": {w.code(q)}, "redirect_uri": {appRedir}, "code_verifier": {verifier},
		"client_id": {confID}, "client_secret": {confSec}}
	if status, body := w.post("/oauth/token", f3, nil); status != http.StatusOK {
		t.Fatalf("secret in the form: %d %v", status, body)
	}
	// A public client presenting a secret is not one.
	f4 := url.Values{"grant_type": {"authorization_code"}, "code": {w.code(authorizeParams())}, "redirect_uri": {appRedir}, "code_verifier": {verifier},
		"client_id": {appID}, "client_secret": {"made-up"}}
	if status, body := w.post("/oauth/token", f4, nil); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Fatalf("a public client with a secret: %d %v", status, body)
	}
}

// TestTokenRefusals: each bad redemption is refused with its error.
func TestTokenRefusals(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	for _, tc := range []struct {
		name   string
		change func(url.Values)
		status int
		want   string
	}{
		{"wrong verifier", func(f url.Values) { f.Set("code_verifier", strings.Repeat("x", 50)) }, 400, "invalid_grant"},
		{"no verifier", func(f url.Values) { f.Del("code_verifier") }, 400, "invalid_grant"},
		{"other redirect", func(f url.Values) { f.Set("redirect_uri", "https://app.example.com/other") }, 400, "invalid_grant"},
		{"other resource", func(f url.Values) { f.Set("resource", filesURL) }, 400, "invalid_target"},
		{"other client", func(f url.Values) { f.Set("client_id", confID) }, 401, "invalid_client"},
		{"unknown code", func(f url.Values) { f.Set("code", "nope") }, 400, "invalid_grant"},
		{"grant type", func(f url.Values) { f.Set("grant_type", "password") }, 400, "unsupported_grant_type"},
		{"wider scope", func(f url.Values) { f.Set("scope", "mcp admin") }, 400, "invalid_scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"grant_type": {"authorization_code"}, "code": {w.code(authorizeParams())}, "client_id": {appID},
				"redirect_uri": {appRedir}, "code_verifier": {verifier}}
			tc.change(form)
			if status, body := w.post("/oauth/token", form, nil); status != tc.status || body["error"] != tc.want {
				t.Fatalf("%d %v, want %d %s", status, body, tc.status, tc.want)
			}
		})
	}
}

// TestCodeReplayRevokes: a code redeemed twice revokes the grant of its
// first redemption: its access token is refused at once, its refresh
// token fails.
func TestCodeReplayRevokes(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	code := w.code(authorizeParams())
	status, body := w.redeem(code)
	if status != http.StatusOK {
		t.Fatalf("first redemption: %d %v", status, body)
	}
	access, refresh := body["access_token"].(string), body["refresh_token"].(string)
	w.wantAccepted(access, memoryURL)
	if status, body := w.redeem(code); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("replay: %d %v, want invalid_grant", status, body)
	}
	w.wantRefused(access, memoryURL, "revoked")
	if status, body := w.refresh(refresh, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("refresh after the replay: %d %v, want invalid_grant", status, body)
	}
}

// TestRefreshRotation: each refresh returns a new refresh token and
// retires the old; scopes may narrow, not widen; the resource is the
// grant's. Presenting a retired token revokes the grant: the access
// tokens of the grant are refused at once, the current refresh token
// fails too.
func TestRefreshRotation(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	access, r1 := w.tokens()
	status, body := w.refresh(r1, url.Values{"scope": {"mcp"}, "resource": {memoryURL}})
	if status != http.StatusOK || body["scope"] != "mcp" {
		t.Fatalf("refresh: %d %v", status, body)
	}
	r2 := body["refresh_token"].(string)
	a2 := body["access_token"].(string)
	if r2 == r1 {
		t.Fatal("the refresh token did not rotate")
	}
	if d := w.check(a2, memoryURL); d.Principal == nil || !slices.Equal(d.Principal.Scopes, []string{"mcp"}) {
		t.Fatalf("narrowed token: %+v", d)
	}
	for _, tc := range []struct {
		name  string
		extra url.Values
		want  string
	}{
		{"wider scope", url.Values{"scope": {"mcp admin"}}, "invalid_scope"},
		{"other resource", url.Values{"resource": {filesURL}}, "invalid_target"},
		{"two resources", url.Values{"resource": {memoryURL, filesURL}}, "invalid_target"},
	} {
		// A refused refresh has used its token up (the checks follow the
		// rotation, the Store finding a grant by its token only then):
		// each case has a grant of its own.
		_, r := w.tokens()
		if status, body := w.refresh(r, tc.extra); status != http.StatusBadRequest || body["error"] != tc.want {
			t.Fatalf("%s: %d %v, want %s", tc.name, status, body, tc.want)
		}
	}
	_, r3 := w.tokens()
	status, body = w.refresh(r3, nil)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, body)
	}
	a4, r4 := body["access_token"].(string), body["refresh_token"].(string)
	w.wantAccepted(a4, memoryURL)
	if status, body := w.refresh(r3, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" ||
		!strings.Contains(body["error_description"].(string), "revoked") {
		t.Fatalf("reuse: %d %v, want invalid_grant, revoked", status, body)
	}
	w.wantRefused(a4, memoryURL, "revoked")
	if status, body := w.refresh(r4, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("the current token after reuse: %d %v, want invalid_grant", status, body)
	}
	// The first grant is untouched.
	w.wantAccepted(access, memoryURL)
}

// TestRefreshOfAnotherClient: a refresh token presented by another
// client is stolen: refused, and its grant revoked.
func TestRefreshOfAnotherClient(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	access, refresh := w.tokens()
	status, body := w.post("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}, &[2]string{confID, confSec})
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("%d %v, want invalid_grant", status, body)
	}
	w.wantRefused(access, memoryURL, "revoked")
}

// TestExpiries: a code is good for codeTTL, an access token for
// accessTokenTtl (the gate refuses it after, with its leeway), a refresh
// token for refreshTokenTtl from its issue.
func TestExpiries(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	code := w.code(authorizeParams())
	w.clk.Advance(codeTTL + time.Second)
	if status, body := w.redeem(code); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("an expired code: %d %v", status, body)
	}
	access, refresh := w.tokens()
	w.clk.Advance(w.s.cfg.AccessTokenTTL + 2*time.Minute) // past the gate's leeway
	w.wantRefused(access, memoryURL, "expired")
	status, body := w.refresh(refresh, nil)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, body)
	}
	w.wantAccepted(body["access_token"].(string), memoryURL)
	w.clk.Advance(w.s.cfg.RefreshTokenTTL + time.Second)
	if status, body := w.refresh(body["refresh_token"].(string), nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("an expired refresh token: %d %v", status, body)
	}
}

// TestCodeOfAnotherClient: a code is redeemed only by the client it was
// issued to, even one that authenticates.
func TestCodeOfAnotherClient(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {w.code(authorizeParams())}, "redirect_uri": {appRedir}, "code_verifier": {verifier}}
	if status, body := w.post("/oauth/token", form, &[2]string{confID, confSec}); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("%d %v, want invalid_grant", status, body)
	}
}

// TestTokenEndpointCORS: browser-based clients may call the token
// endpoint from any origin (a preflight is answered), and only by POST.
func TestTokenEndpointCORS(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	r := httptest.NewRequest(http.MethodOptions, issuer+"/oauth/token", nil)
	r.Header.Set("Origin", "https://app.example.com")
	r.Header.Set("Access-Control-Request-Method", "POST")
	rec := httptest.NewRecorder()
	w.s.Handler().ServeHTTP(rec, r)
	if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(rec.Header().Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight: %d %v", rec.Code, rec.Header())
	}
	if rec := w.get("/oauth/token"); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" {
		t.Fatalf("GET: %d %v", rec.Code, rec.Header())
	}
}
