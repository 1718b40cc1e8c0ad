package auth

import (
	"net/http"
	"sync"
	"testing"
)

// TestJWTLocalKeys: an issuer whose keys the gateway holds (its own
// authorization server) checks tokens with them, fetching nothing; a key
// it stops giving (retired) is refused at once; Revoked refuses a token
// whose signature and audience are good.
func TestJWTLocalKeys(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t) // publishes no key: a fetch would find none
	var (
		mu      sync.Mutex
		keys    = []PublicKey{{ID: keyEd().kid, Algorithm: "EdDSA", Key: keyEd().key.Public()}, {ID: keyEC().kid, Key: keyEC().key.Public()}}
		revoked = map[string]bool{}
	)
	is := Issuer{
		Issuer: f.issuer,
		Keys: func() []PublicKey {
			mu.Lock()
			defer mu.Unlock()
			return keys
		},
		Revoked: func(claims map[string]any) bool {
			mu.Lock()
			defer mu.Unlock()
			gid, _ := claims["gid"].(string)
			return revoked[gid]
		},
	}
	g := newGate(t, oauthConfig(is), clk)
	ed := keyEd().sign(t, f.claims(clk, map[string]any{"gid": "g1"}))
	wantOK(t, g.Authenticate(bearer(ed), memory), "alice")
	wantOK(t, g.Authenticate(bearer(keyEC().sign(t, f.claims(clk, map[string]any{"gid": "g2"}))), memory), "alice")
	wantRefused(t, g.Authenticate(bearer(ed), github), http.StatusUnauthorized, "does not include", github.Resource)
	wantRefused(t, g.Authenticate(bearer(keyA().sign(t, f.claims(clk, nil))), memory), http.StatusUnauthorized, `unknown key id "A"`)
	// The EdDSA key given for EdDSA only: a token claiming another
	// algorithm with its id is refused.
	wantRefused(t, g.Authenticate(bearer(signer{keyEd().kid, "ES256", keyEC().key}.sign(t, f.claims(clk, nil))), memory),
		http.StatusUnauthorized, `key "D" of`, "is not a key for ES256")

	mu.Lock()
	revoked["g1"] = true
	mu.Unlock()
	wantRefused(t, g.Authenticate(bearer(ed), memory), http.StatusUnauthorized, "revoked")
	wantOK(t, g.Authenticate(bearer(keyEC().sign(t, f.claims(clk, map[string]any{"gid": "g2"}))), memory), "alice")

	mu.Lock()
	keys = keys[1:] // key D retired
	mu.Unlock()
	wantRefused(t, g.Authenticate(bearer(keyEd().sign(t, f.claims(clk, map[string]any{"gid": "g2"}))), memory), http.StatusUnauthorized, `unknown key id "D"`)
	if jwks, meta := f.fetches(); jwks != 0 || meta != 0 {
		t.Errorf("%d key set and %d metadata fetches for an issuer with local keys, want none", jwks, meta)
	}
}
