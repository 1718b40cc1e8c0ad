package auth

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestJWTAccepted: tokens of each key type, with their scopes, claims and
// expiry in the principal; the key set is discovered from the issuer's
// metadata (path-inserted RFC 8414 URL) and fetched once.
func TestJWTAccepted(t *testing.T) {
	clk := newClock()
	signers := []signer{keyA(), keyEC(), keyEC384(), keyEd(), {"P", "PS256", keyA().key}}
	f := newFakeIssuer(t, signers...)
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	for _, s := range signers {
		t.Run(s.alg, func(t *testing.T) {
			d := g.Authenticate(bearer(s.sign(t, f.claims(clk, nil))), memory)
			p := wantOK(t, d, "alice")
			if p.Kind != KindToken || p.Issuer != f.issuer || !slices.Equal(p.Scopes, []string{"mcp", "profile"}) ||
				p.Claims["sub"] != "alice" || !p.Expiry.Equal(clk.Now().Add(time.Hour)) {
				t.Errorf("principal %+v", p)
			}
		})
	}
	if jwks, meta := f.fetches(); jwks != 1 || meta != 1 {
		t.Errorf("%d key set and %d metadata fetches, want 1 each", jwks, meta)
	}
}

// TestJWKSRotation: the issuer rotates from key A to key B, right after
// the gateway fetched its set. A token of the new key B makes the gateway
// fetch the set again (the key id is unknown), after which tokens of A,
// which left the set, are refused; unknown key ids refetch at most once
// per KeySetMinInterval.
func TestJWKSRotation(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer, JWKSURL: f.srv.URL + "/realms/mcp/certs"}), clk)
	tokenA := keyA().sign(t, f.claims(clk, nil))
	wantOK(t, g.Authenticate(bearer(tokenA), memory), "alice")

	// B appears beside A, then A leaves.
	f.setKeys(keyA(), keyB())
	tokenB := keyB().sign(t, f.claims(clk, map[string]any{"sub": "bob"}))
	wantOK(t, g.Authenticate(bearer(tokenB), memory), "bob")
	if jwks, meta := f.fetches(); jwks != 2 || meta != 0 {
		t.Fatalf("%d key set and %d metadata fetches, want 2 and 0 (jwksUrl given)", jwks, meta)
	}
	wantOK(t, g.Authenticate(bearer(tokenA), memory), "alice") // still in the set

	f.setKeys(keyB())
	// A made-up key id within the interval does not fetch...
	tokenC := signer{"C", "RS256", rsaA}.sign(t, f.claims(clk, nil))
	wantRefused(t, g.Authenticate(bearer(tokenC), memory), http.StatusUnauthorized, `unknown key id "C"`)
	if jwks, _ := f.fetches(); jwks != 2 {
		t.Fatalf("%d key set fetches, want 2: an unknown key id refetched within the interval", jwks)
	}
	// ...A is still in the cached set...
	wantOK(t, g.Authenticate(bearer(tokenA), memory), "alice")
	// ...and after the interval, the next unknown key id fetches the set,
	// without A now.
	clk.Advance(30 * time.Second)
	wantRefused(t, g.Authenticate(bearer(tokenC), memory), http.StatusUnauthorized, `unknown key id "C"`)
	d := g.Authenticate(bearer(tokenA), memory)
	wantRefused(t, d, http.StatusUnauthorized, `unknown key id "A"`, f.issuer)
	if !strings.Contains(d.Challenge, `error="invalid_token"`) {
		t.Errorf("challenge %q", d.Challenge)
	}
	wantOK(t, g.Authenticate(bearer(tokenB), memory), "bob")
	if jwks, _ := f.fetches(); jwks != 3 {
		t.Fatalf("%d key set fetches, want 3", jwks)
	}
}

// TestJWKSMaxAge: a set older than KeySetMaxAge is fetched again, so a
// key that left it stops working even when no new key id comes.
func TestJWKSMaxAge(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk, func(o *Options) { o.KeySetMaxAge = 10 * time.Minute })
	claims := f.claims(clk, map[string]any{"exp": clk.Now().Add(24 * time.Hour).Unix()})
	tokenA := keyA().sign(t, claims)
	wantOK(t, g.Authenticate(bearer(tokenA), memory), "alice")
	f.setKeys(keyB())
	clk.Advance(9 * time.Minute)
	wantOK(t, g.Authenticate(bearer(tokenA), memory), "alice")
	clk.Advance(time.Minute)
	wantRefused(t, g.Authenticate(bearer(tokenA), memory), http.StatusUnauthorized, `unknown key id "A"`)
	if jwks, meta := f.fetches(); jwks != 2 || meta != 1 {
		t.Errorf("%d key set and %d metadata fetches, want 2 and 1", jwks, meta)
	}
}

// TestJWKSUnavailable: an issuer whose keys cannot be fetched gets 503
// (not 401: the client's token may be fine), retried after KeySetRetry;
// once fetched, the set outlives the issuer's outages.
func TestJWKSUnavailable(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	f.setStatus(http.StatusInternalServerError)
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	token := keyA().sign(t, f.claims(clk, map[string]any{"exp": clk.Now().Add(24 * time.Hour).Unix()}))
	d := g.Authenticate(bearer(token), memory)
	wantRefused(t, d, http.StatusServiceUnavailable, "cannot check the token now", "500")
	if d.Challenge != "" || d.RetryAfter != 5*time.Second {
		t.Errorf("decision %+v, want no challenge and RetryAfter 5s", d)
	}
	g.Authenticate(bearer(token), memory) // within KeySetRetry: no fetch
	if jwks, _ := f.fetches(); jwks != 1 {
		t.Fatalf("%d key set fetches, want 1", jwks)
	}
	f.setStatus(0)
	clk.Advance(5 * time.Second)
	wantOK(t, g.Authenticate(bearer(token), memory), "alice")

	f.setStatus(http.StatusBadGateway)
	clk.Advance(2 * time.Hour) // stale: fetched again, and it fails
	wantOK(t, g.Authenticate(bearer(token), memory), "alice")
	if jwks, _ := f.fetches(); jwks != 3 {
		t.Errorf("%d key set fetches, want 3", jwks)
	}
}

// TestJWKSDiscovery: the metadata must name the configured issuer (RFC
// 8414 section 3.3), else its keys are not used.
func TestJWKSDiscovery(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	f.metaIssuer = "https://evil.example.com"
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	d := g.Authenticate(bearer(keyA().sign(t, f.claims(clk, nil))), memory)
	wantRefused(t, d, http.StatusServiceUnavailable, `names issuer "https://evil.example.com"`, "set jwksUrl")
	if jwks, _ := f.fetches(); jwks != 0 {
		t.Errorf("%d key set fetches, want 0", jwks)
	}
}

// TestJWTConcurrentFirstUse: many requests at once with a fresh issuer
// make one fetch; the others wait for it.
func TestJWTConcurrentFirstUse(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	token := keyA().sign(t, f.claims(clk, nil))
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if d := g.Authenticate(bearer(token), memory); d.Status != 0 {
				t.Errorf("decision %+v", d)
			}
		})
	}
	wg.Wait()
	if jwks, meta := f.fetches(); jwks != 1 || meta != 1 {
		t.Errorf("%d key set and %d metadata fetches, want 1 each", jwks, meta)
	}
}

// TestJWTRefused: every way a token can be wrong, each refused with 401
// invalid_token and a reason that names what failed.
func TestJWTRefused(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA(), keyEC())
	other := newFakeIssuer(t, keyEC(), keyB())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer, Audiences: []string{"mcpgate"}},
		Issuer{Issuer: other.issuer, Algorithms: []string{"ES256"}}), clk)
	now := clk.Now()
	sign := func(changes map[string]any) string { return keyA().sign(t, f.claims(clk, changes)) }

	tampered := func() string {
		parts := strings.Split(sign(nil), ".")
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"alice"`, `"admin"`, 1)))
		return strings.Join(parts, ".")
	}
	badSignature := func() string {
		tok := sign(nil)
		i := strings.LastIndexByte(tok, '.') + 5
		c := byte('A')
		if tok[i] == 'A' {
			c = 'B'
		}
		return tok[:i] + string(c) + tok[i+1:]
	}
	unsigned := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, f.claims(clk, nil))
		tok.Header["kid"] = "A"
		s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The classic confusion: the issuer's public key, known to all, used
	// as an HMAC secret.
	hmacWithPublicKey := func(alg string) string {
		der, _ := x509.MarshalPKIXPublicKey(rsaA.Public())
		secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		tok := jwt.NewWithClaims(jwt.GetSigningMethod(alg), f.claims(clk, nil))
		tok.Header["kid"] = "A"
		s, err := tok.SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	withHeader := func(k string, v any) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, f.claims(clk, nil))
		tok.Header["kid"] = "A"
		tok.Header[k] = v
		s, err := tok.SignedString(rsaA)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	tests := []struct {
		name  string
		token string
		want  []string
	}{
		{"wrong audience", sign(map[string]any{"aud": github.Resource}),
			[]string{`its audience ["https://gw.example.com/servers/github/mcp"] does not include https://gw.example.com/servers/memory/mcp`}},
		{"audience of the gateway root", sign(map[string]any{"aud": "https://gw.example.com"}), []string{"does not include " + memory.Resource}},
		{"no audience", sign(map[string]any{"aud": nil}), []string{"names no audience (aud); it must name " + memory.Resource}},
		{"another issuer's extra audience", keyEC().sign(t, other.claims(clk, map[string]any{"aud": "mcpgate"})),
			[]string{`its audience ["mcpgate"] does not include`}},
		{"algorithm not accepted from this issuer", keyB().sign(t, other.claims(clk, nil)),
			[]string{"algorithm RS256 is not accepted from " + other.issuer + " (accepted: ES256)"}},
		{"expired", sign(map[string]any{"exp": now.Add(-61 * time.Second).Unix()}), []string{"expired at 2026-03-01T11:58:59Z"}},
		{"not yet valid", sign(map[string]any{"nbf": now.Add(61 * time.Second).Unix()}), []string{"not valid before 2026-03-01T12:01:01Z"}},
		{"no expiry", sign(map[string]any{"exp": nil}), []string{"it has no expiry (exp)"}},
		{"expiry not a number", sign(map[string]any{"exp": "tomorrow"}), []string{"a time claim"}},
		{"tampered payload", tampered(), []string{`its signature does not verify with key "A" of ` + f.issuer}},
		{"tampered signature", badSignature(), []string{"its signature does not verify"}},
		{"signed by another key with its kid", signer{"A", "RS256", rsaB}.sign(t, f.claims(clk, nil)), []string{"its signature does not verify"}},
		{"alg none", unsigned(), []string{`algorithm "none" is not accepted`}},
		{"HS256 with the public key", hmacWithPublicKey("HS256"), []string{`algorithm "HS256" is not accepted`}},
		{"HS512 with the public key", hmacWithPublicKey("HS512"), []string{`algorithm "HS512" is not accepted`}},
		{"unknown alg", withHeader("alg", "XX999"), []string{`algorithm "XX999" is not accepted`}},
		{"crit", withHeader("crit", []string{"exp"}), []string{"critical header parameters"}},
		{"untrusted issuer", sign(map[string]any{"iss": "https://evil.example.com"}), []string{`issuer "https://evil.example.com" is not trusted`}},
		{"issuer with a trailing slash", sign(map[string]any{"iss": f.issuer + "/"}), []string{"is not trusted"}},
		{"no issuer", sign(map[string]any{"iss": nil}), []string{"it names no issuer (iss)"}},
		{"no subject", sign(map[string]any{"sub": nil}), []string{"it names no subject (sub)"}},
		{"EC key for RS256", signer{"E", "RS256", rsaA}.sign(t, f.claims(clk, nil)), []string{`key "E" of ` + f.issuer + ` is not a key for RS256`}},
		{"key not in the set", keyEC384().sign(t, f.claims(clk, nil)), []string{`unknown key id "E384"`}},
		{"malformed", "eyJhbGciOiJSUzI1NiJ9.e30.!!", []string{"malformed bearer token"}},
		{"bad base64 payload", "eyJhbGciOiJSUzI1NiJ9.@@@.c2ln", []string{"malformed bearer token"}},
		{"payload not JSON", "eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln", []string{"malformed JWT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := g.Authenticate(bearer(tt.token), memory)
			status := http.StatusUnauthorized
			if strings.Contains(tt.name, "malformed") || strings.Contains(tt.name, "base64") {
				status = http.StatusBadRequest
			}
			wantRefused(t, d, status, tt.want...)
			if status == http.StatusUnauthorized && !strings.HasPrefix(d.Challenge, `Bearer error="invalid_token", resource_metadata="`+memory.Metadata+`", scope="mcp", error_description="invalid token: `) {
				t.Errorf("challenge %q", d.Challenge)
			}
		})
	}

	// Within the leeway, the times pass; the extra audience passes.
	for _, changes := range []map[string]any{
		{"exp": now.Add(-59 * time.Second).Unix()},
		{"nbf": now.Add(59 * time.Second).Unix()},
		{"aud": []string{"https://elsewhere.example.com", "mcpgate"}},
		{"aud": "HTTPS://GW.example.com:443/servers/memory/mcp/"},
	} {
		wantOK(t, g.Authenticate(bearer(sign(changes)), memory), f.issuer+"#alice")
	}
}

// TestJWTScopes: a token without the scopes its target needs gets 403
// insufficient_scope naming them; a target's own scopes replace the
// gateway's; "scp" arrays count.
func TestJWTScopes(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	cfg := oauthConfig(Issuer{Issuer: f.issuer})
	cfg.Servers = map[string]TargetConfig{"github": {Scopes: []string{"mcp", "repo"}}}
	g := newGate(t, cfg, clk)
	githubToken := func(changes map[string]any) string {
		changes["aud"] = github.Resource
		return keyA().sign(t, f.claims(clk, changes))
	}

	d := g.Authenticate(bearer(githubToken(map[string]any{})), github)
	wantRefused(t, d, http.StatusForbidden, "insufficient scope: the token lacks repo")
	want := `Bearer error="insufficient_scope", resource_metadata="` + github.Metadata + `", scope="mcp repo", error_description="insufficient scope: the token lacks repo"`
	if d.Challenge != want {
		t.Errorf("challenge\n %s\nwant\n %s", d.Challenge, want)
	}
	wantOK(t, g.Authenticate(bearer(githubToken(map[string]any{"scope": "mcp repo"})), github), "alice")
	wantOK(t, g.Authenticate(bearer(githubToken(map[string]any{"scope": nil, "scp": []string{"repo", "mcp"}})), github), "alice")
	wantRefused(t, g.Authenticate(bearer(keyA().sign(t, f.claims(clk, map[string]any{"scope": "profile"}))), memory),
		http.StatusForbidden, "lacks mcp")
}
