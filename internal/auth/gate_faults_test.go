package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Attacks of a hostile client on the Gate: token confusion, audience
// spellings, algorithm confusion, JWKS and introspection abuse, header
// parsing.

// rawJWT builds a compact JWS from a header and claims, with sig as its
// signature part (already base64url).
func rawJWT(header, claims map[string]any, sig string) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(header) + "." + enc(claims) + "." + sig
}

// TestFaultTokenConfusion: a token for one resource never opens another:
// another server, an endpoint (even the one that merges it), the default
// endpoint.
func TestFaultTokenConfusion(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	token := keyA().sign(t, f.claims(clk, nil)) // aud: memory
	wantOK(t, g.Authenticate(bearer(token), memory), "alice")
	defEndpoint := Target{Kind: "endpoint", Name: "default", Resource: "https://gw.example.com/mcp"}
	for _, tg := range []Target{github, team, defEndpoint} {
		wantRefused(t, g.Authenticate(bearer(token), tg), http.StatusUnauthorized, "audience", tg.Resource)
	}
}

// TestFaultAudienceSpellings: spellings of the same resource URL fit
// (scheme and host case, a trailing slash, the default port); anything
// that names another URL does not (path case, extra path, a prefix, a
// query, a fragment, userinfo, another port, dot segments, encoded path).
func TestFaultAudienceSpellings(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	fits := []string{
		"HTTPS://GW.EXAMPLE.COM/servers/memory/mcp",
		"https://gw.example.com/servers/memory/mcp/",
		"https://gw.example.com:443/servers/memory/mcp",
	}
	misfits := []string{
		"https://gw.example.com/Servers/memory/mcp",
		"https://gw.example.com/servers/MEMORY/mcp",
		"https://gw.example.com/servers/memory/mcp/x",
		"https://gw.example.com/servers/memory",
		"https://gw.example.com/servers/memory/mcp?x=1",
		"https://gw.example.com/servers/memory/mcp?",
		"https://gw.example.com/servers/memory/mcp#f",
		"https://evil@gw.example.com/servers/memory/mcp",
		"https://gw.example.com:8443/servers/memory/mcp",
		"http://gw.example.com/servers/memory/mcp",
		"https://gw.example.com/servers/github/../memory/mcp",
		"https://gw.example.com/servers/%6Demory/mcp",
		"https://gw.example.com./servers/memory/mcp",
		"https://evil.example/servers/memory/mcp",
		"gw.example.com/servers/memory/mcp",
		"",
	}
	for _, aud := range fits {
		tok := keyA().sign(t, f.claims(clk, map[string]any{"aud": aud}))
		if d := g.Authenticate(bearer(tok), memory); d.Status != 0 {
			t.Errorf("aud %q: %+v, want accepted", aud, d)
		}
	}
	for _, aud := range misfits {
		tok := keyA().sign(t, f.claims(clk, map[string]any{"aud": aud}))
		if d := g.Authenticate(bearer(tok), memory); d.Status != http.StatusUnauthorized {
			t.Errorf("aud %q: %+v, want 401", aud, d)
		}
		// Nor as one of a list of strangers.
		tok = keyA().sign(t, f.claims(clk, map[string]any{"aud": []any{aud, "https://other.example/mcp"}}))
		if d := g.Authenticate(bearer(tok), memory); d.Status != http.StatusUnauthorized {
			t.Errorf("aud [%q]: %+v, want 401", aud, d)
		}
	}
	// A non-string member of aud is no audience at all.
	tok := keyA().sign(t, f.claims(clk, map[string]any{"aud": []any{1, memory.Resource}}))
	if d := g.Authenticate(bearer(tok), memory); d.Status != http.StatusUnauthorized {
		t.Errorf("aud with a number: %+v, want 401", d)
	}
}

// TestFaultAlgConfusion: HS256 with the issuer's public key (its JWK, its
// modulus, its PEM-less bytes) as secret, alg none, a kid naming a key of
// another type, and jku / x5u / jwk headers pointing at the attacker's own
// key: all refused, and none makes the gateway fetch anything but the
// issuer's set.
func TestFaultAlgConfusion(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA(), keyEC())
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the gateway fetched the attacker's %s", r.URL)
		writeJSON(w, map[string]any{"keys": []any{keyB().jwk()}})
	}))
	defer attacker.Close()
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	claims := f.claims(clk, nil)

	// Warm the set.
	wantOK(t, g.Authenticate(bearer(keyA().sign(t, claims)), memory), "alice")

	hs := func(secret []byte, header map[string]any) string {
		head := rawJWT(header, claims, "")
		head = strings.TrimSuffix(head, ".")
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(head))
		return head + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}
	jwkA, _ := json.Marshal(keyA().jwk())
	nA := keyA().jwk()["n"].(string)
	cases := map[string]string{
		"HS256 with the JWK as secret":     hs(jwkA, map[string]any{"alg": "HS256", "typ": "JWT", "kid": "A"}),
		"HS256 with the modulus as secret": hs([]byte(nA), map[string]any{"alg": "HS256", "kid": "A"}),
		"HS512 no kid":                     hs(jwkA, map[string]any{"alg": "HS512"}),
		"alg none":                         rawJWT(map[string]any{"alg": "none", "kid": "A"}, claims, ""),
		"alg None":                         rawJWT(map[string]any{"alg": "None"}, claims, ""),
		"alg number":                       rawJWT(map[string]any{"alg": 256, "kid": "A"}, claims, "AAAA"),
	}
	// RS256 claimed, kid naming the EC key.
	ecAsRSA := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	ecAsRSA.Header["kid"] = keyEC().kid
	s, err := ecAsRSA.SignedString(keyB().key)
	if err != nil {
		t.Fatal(err)
	}
	cases["RS256 with the kid of an EC key"] = s
	// ES256 claimed, kid naming the RSA key.
	rsaAsEC := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	rsaAsEC.Header["kid"] = keyA().kid
	if s, err = rsaAsEC.SignedString(keyEC().key); err != nil {
		t.Fatal(err)
	}
	cases["ES256 with the kid of an RSA key"] = s
	// The attacker's own key B, advertised every way a header can.
	for _, hdr := range []string{"jku", "x5u", "jwk"} {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = "A" // the issuer's kid: the signature must not verify
		switch hdr {
		case "jwk":
			tok.Header["jwk"] = keyB().jwk()
		default:
			tok.Header[hdr] = attacker.URL
		}
		s, err := tok.SignedString(keyB().key)
		if err != nil {
			t.Fatal(err)
		}
		cases[hdr+" header, issuer's kid"] = s
		delete(tok.Header, "kid")
		if s, err = tok.SignedString(keyB().key); err != nil {
			t.Fatal(err)
		}
		cases[hdr+" header, no kid"] = s
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			d := g.Authenticate(bearer(tok), memory)
			if d.Status != http.StatusUnauthorized || d.Principal != nil {
				t.Fatalf("decision %+v, want 401", d)
			}
		})
	}
}

// TestFaultMadeUpKids: a flood of tokens with made-up key ids (and some
// concurrent) makes at most one extra fetch per KeySetMinInterval.
func TestFaultMadeUpKids(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	wantOK(t, g.Authenticate(bearer(keyA().sign(t, f.claims(clk, nil))), memory), "alice")
	forge := func(i int) string {
		return signer{fmt.Sprintf("made-up-%d", i), "RS256", keyB().key}.sign(t, f.claims(clk, nil))
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if d := g.Authenticate(bearer(forge(i)), memory); d.Status != http.StatusUnauthorized {
				t.Errorf("decision %+v, want 401", d)
			}
		})
	}
	wg.Wait()
	if jwks, _ := f.fetches(); jwks > 2 {
		t.Fatalf("%d key set fetches for 200 made-up kids, want at most 2", jwks)
	}
	clk.Advance(10 * time.Second)
	for i := range 50 {
		g.Authenticate(bearer(forge(1000+i)), memory)
	}
	if jwks, _ := f.fetches(); jwks > 2 {
		t.Fatalf("%d key set fetches within the interval, want at most 2", jwks)
	}
	clk.Advance(25 * time.Second)
	for i := range 50 {
		g.Authenticate(bearer(forge(2000+i)), memory)
	}
	if jwks, _ := f.fetches(); jwks > 3 {
		t.Fatalf("%d key set fetches, want at most 3", jwks)
	}
	// The real key still works throughout.
	wantOK(t, g.Authenticate(bearer(keyA().sign(t, f.claims(clk, nil))), memory), "alice")
}

// TestFaultHugeJWKS: a key set over the size bound is not read whole: 503,
// and the request does not hang.
func TestFaultHugeJWKS(t *testing.T) {
	clk := newClock()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"keys":[`))
		pad := strings.Repeat(`{"kty":"oct","k":"AAAA"},`, 1000)
		for range 200 { // ~5 MB
			if _, err := w.Write([]byte(pad)); err != nil {
				return
			}
		}
		w.Write([]byte(`{"kty":"oct"}]}`))
	}))
	defer srv.Close()
	g := newGate(t, oauthConfig(Issuer{Issuer: "https://as.example.com", JWKSURL: srv.URL}), clk)
	tok := keyA().sign(t, jwt.MapClaims{"iss": "https://as.example.com", "sub": "x", "aud": memory.Resource,
		"exp": clk.Now().Add(time.Hour).Unix()})
	d := g.Authenticate(bearer(tok), memory)
	wantRefused(t, d, http.StatusServiceUnavailable, "larger than")
	if d.RetryAfter <= 0 {
		t.Errorf("no Retry-After: %+v", d)
	}
}

// TestFaultSlowJWKS: an issuer whose key set never answers holds a request
// no longer than FetchTimeout (the first, and those that wait for it),
// and a waiter whose client left is let go at once.
func TestFaultSlowJWKS(t *testing.T) {
	clk := newClock()
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	const timeout = 300 * time.Millisecond
	g := newGate(t, oauthConfig(Issuer{Issuer: "https://as.example.com", JWKSURL: srv.URL}), clk,
		func(o *Options) { o.FetchTimeout = timeout })
	tok := keyA().sign(t, jwt.MapClaims{"iss": "https://as.example.com", "sub": "x", "aud": memory.Resource,
		"exp": clk.Now().Add(time.Hour).Unix()})

	done := make(chan Decision, 1)
	start := time.Now()
	go func() { done <- g.Authenticate(bearer(tok), memory) }()
	<-entered
	// A second request waits for that fetch; its client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	waiter := make(chan Decision, 1)
	go func() { waiter <- g.Authenticate(bearer(tok).WithContext(ctx), memory) }()
	cancel()
	if d := <-waiter; d.Status != http.StatusServiceUnavailable {
		t.Errorf("waiter: %+v, want 503", d)
	}
	d := <-done
	if d.Status != http.StatusServiceUnavailable {
		t.Errorf("first: %+v, want 503", d)
	}
	if el := time.Since(start); el > timeout+5*time.Second {
		t.Errorf("the request took %v with a fetch timeout of %v", el, timeout)
	}
}

// TestFaultIntrospectionAbuse: an inactive token is asked about once
// (cached), wherever it is sent; a response without an audience is
// refused; an active token for another resource opens nothing; a slow
// endpoint costs no more than FetchTimeout; an API-key-shaped guess is
// never sent when it is a key.
func TestFaultIntrospectionAbuse(t *testing.T) {
	clk := newClock()
	f := newFakeIntrospection(t)
	// Every introspection below must fit in FetchTimeout on a busy
	// machine; the slow endpoint's check allows it and more.
	g := newGate(t, introspectionConfig(f), clk, func(o *Options) { o.FetchTimeout = 2 * time.Second })
	exp := float64(clk.Now().Add(time.Hour).Unix())
	f.set("noaud", map[string]any{"active": true, "sub": "mallory", "scope": "mcp", "exp": exp})
	f.set("emptyaud", map[string]any{"active": true, "sub": "mallory", "scope": "mcp", "aud": []any{}, "exp": exp})
	f.set("github", map[string]any{"active": true, "sub": "bob", "scope": "mcp", "aud": github.Resource, "exp": exp})
	f.set("nosub", map[string]any{"active": true, "scope": "mcp", "aud": memory.Resource, "exp": exp})
	f.set("strictly-active", map[string]any{"active": "true", "sub": "x", "aud": memory.Resource})

	for range 5 {
		wantRefused(t, g.Authenticate(bearer("revoked"), memory), http.StatusUnauthorized, "not active")
		wantRefused(t, g.Authenticate(bearer("revoked"), github), http.StatusUnauthorized, "not active")
	}
	if n := f.count(); n != 1 {
		t.Errorf("%d introspection calls for one inactive token, want 1", n)
	}
	wantRefused(t, g.Authenticate(bearer("noaud"), memory), http.StatusUnauthorized, "no audience")
	wantRefused(t, g.Authenticate(bearer("emptyaud"), memory), http.StatusUnauthorized, "no audience")
	wantRefused(t, g.Authenticate(bearer("github"), memory), http.StatusUnauthorized, "audience")
	wantRefused(t, g.Authenticate(bearer("github"), team), http.StatusUnauthorized, "audience")
	wantOK(t, g.Authenticate(bearer("github"), github), "bob")
	wantRefused(t, g.Authenticate(bearer("nosub"), memory), http.StatusUnauthorized, "subject")
	// "active": "true" (a string) is not an answer.
	if d := g.Authenticate(bearer("strictly-active"), memory); d.Status == 0 {
		t.Errorf("string active accepted: %+v", d)
	}

	// A slow endpoint: 503 within the fetch timeout, not cached.
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
	start := time.Now()
	d := g.Authenticate(bearer("slow-token"), memory)
	if d.Status != http.StatusServiceUnavailable || d.RetryAfter <= 0 {
		t.Errorf("slow endpoint: %+v, want 503 with Retry-After", d)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("slow introspection held the request %v", el)
	}
	f.mu.Lock()
	close(f.gate)
	f.gate = nil
	f.mu.Unlock()
}

// TestFaultHeaderParsing: Authorization headers a hostile client may send.
func TestFaultHeaderParsing(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	cfg := oauthConfig(Issuer{Issuer: f.issuer})
	cfg.APIKeys = []APIKey{{Name: "ci", SHA256: hashOf("ci-key-0123456789abcdef")}}
	g := newGate(t, cfg, clk)
	tok := keyA().sign(t, f.claims(clk, nil))

	// Two Authorization headers, one good: 400, whichever comes first.
	for _, order := range [][2]string{{"Bearer " + tok, "Bearer junk"}, {"Bearer junk", "Bearer " + tok}, {"Bearer " + tok, "Bearer " + tok}} {
		r := request("")
		r.Header.Add("Authorization", order[0])
		r.Header.Add("Authorization", order[1])
		wantRefused(t, g.Authenticate(r, memory), http.StatusBadRequest)
	}
	// Lower-case scheme and several spaces are fine.
	wantOK(t, g.Authenticate(request("bearer "+tok), memory), "alice")
	wantOK(t, g.Authenticate(request("BEARER   "+tok), memory), "alice")
	wantOK(t, g.Authenticate(request("bearer ci-key-0123456789abcdef"), memory), "ci")
	for _, h := range []string{
		"Bearer\t" + tok,              // a tab is not the separator: no bearer credentials
		"Bearer " + tok + " extra",    // two tokens
		"Bearer " + tok + ",Bearer x", // a list
		"Bearer ci-key-0123456789abcdéf",
		"Bearer " + strings.Repeat("a", maxTokenLength+1),
		"Bearer ci-key-0123456789abcdef\x00",
		"Bearer ci-key-0123456789abcdef=x",
		"Basic " + base64.StdEncoding.EncodeToString([]byte("ci:ci-key-0123456789abcdef")),
		"Bearer =",
	} {
		d := g.Authenticate(request(h), memory)
		if d.Status == 0 || d.Principal != nil {
			t.Errorf("%.60q: accepted %+v", h, d)
		}
		if strings.ContainsAny(d.Challenge, "\r\n\x00") || len(d.Challenge) > 1024 {
			t.Errorf("%.60q: challenge %q", h, d.Challenge)
		}
	}
	// A huge JWT-shaped token is refused before any fetch of another kind.
	huge := rawJWT(map[string]any{"alg": "RS256", "kid": strings.Repeat("k", 20000)}, f.claims(clk, nil), "AAAA")
	wantRefused(t, g.Authenticate(bearer(huge), memory), http.StatusBadRequest)
}

// TestFaultAPIKeyConfusion: a key for server memory opens neither another
// server, nor an endpoint (one merging memory included), nor the default
// endpoint; a key for endpoint team opens no server; a key of the right
// target but a scoped-down target needs its scopes; an API key's hash (or
// a prefix of the key) is not the key.
func TestFaultAPIKeyConfusion(t *testing.T) {
	clk := newClock()
	const memKey, teamKey = "memory-key-0123456789", "team-key-0123456789ab"
	cfg := Config{
		APIKeys: []APIKey{
			{Name: "mem", SHA256: hashOf(memKey), Servers: []string{"memory"}},
			{Name: "team", SHA256: hashOf(teamKey), Endpoints: []string{"team"}, Servers: []string{}},
		},
		Scopes:    []string{"mcp"},
		Required:  true,
		Endpoints: map[string]TargetConfig{"admin": {Scopes: []string{"admin"}}},
	}
	g := newGate(t, cfg, clk)
	defEndpoint := Target{Kind: "endpoint", Name: "default", Resource: "https://gw.example.com/mcp"}
	memoryEndpoint := Target{Kind: "endpoint", Name: "memory", Resource: "https://gw.example.com/endpoints/memory/mcp"}
	admin := Target{Kind: "endpoint", Name: "admin", Resource: "https://gw.example.com/endpoints/admin/mcp"}
	wantOK(t, g.Authenticate(bearer(memKey), memory), "mem")
	for _, tg := range []Target{github, team, defEndpoint, memoryEndpoint, {Kind: "", Name: "memory"}} {
		wantRefused(t, g.Authenticate(bearer(memKey), tg), http.StatusForbidden, "mem")
	}
	wantOK(t, g.Authenticate(bearer(teamKey), team), "team")
	for _, tg := range []Target{memory, github, defEndpoint, admin} {
		if d := g.Authenticate(bearer(teamKey), tg); d.Status != http.StatusForbidden {
			t.Errorf("team key on %s/%s: %+v, want 403", tg.Kind, tg.Name, d)
		}
	}
	for _, guess := range []string{hashOf(memKey), memKey[:len(memKey)-1], memKey + "0", strings.ToUpper(memKey)} {
		wantRefused(t, g.Authenticate(bearer(guess), memory), http.StatusUnauthorized)
	}
}

// TestFaultClaimValues: claims of odd types or values never make a token
// pass: exp null, a string, out of range; nbf far ahead; sub a number; iss
// a near miss of the trusted one; aud null.
func TestFaultClaimValues(t *testing.T) {
	clk := newClock()
	f := newFakeIssuer(t, keyA())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	for name, change := range map[string]map[string]any{
		"exp string":     {"exp": "9999999999"},
		"exp huge":       {"exp": 1e300},
		"exp overflow":   {"exp": 1e19},
		"exp negative":   {"exp": -1},
		"exp zero":       {"exp": 0},
		"exp list":       {"exp": []any{9999999999}},
		"nbf ahead":      {"nbf": clk.Now().Add(time.Hour).Unix()},
		"nbf string":     {"nbf": "0"},
		"sub number":     {"sub": 42},
		"sub empty":      {"sub": ""},
		"iss slash":      {"iss": f.issuer + "/"},
		"iss case":       {"iss": strings.ToUpper(f.issuer)},
		"iss list":       {"iss": []any{f.issuer}},
		"aud object":     {"aud": map[string]any{"x": memory.Resource}},
		"aud empty list": {"aud": []any{}},
	} {
		tok := keyA().sign(t, f.claims(clk, change))
		if d := g.Authenticate(bearer(tok), memory); d.Status != http.StatusUnauthorized || d.Principal != nil {
			t.Errorf("%s: %+v, want 401", name, d)
		}
	}
	// JSON null values, which the map of changes cannot say.
	for _, claim := range []string{"exp", "aud", "iss", "sub"} {
		c := f.claims(clk, nil)
		c[claim] = json.RawMessage("null")
		tok := keyA().sign(t, c)
		if d := g.Authenticate(bearer(tok), memory); d.Status != http.StatusUnauthorized || d.Principal != nil {
			t.Errorf("%s null: %+v, want 401", claim, d)
		}
	}
}

// TestFaultStaleSetSlowIssuer: when the key set is due for its hourly
// refetch and the issuer hangs, only the request that refetches waits (up
// to FetchTimeout); the others go on with the set they have, which stays
// in use while the issuer is unreachable anyway. Before the fix every
// request waited for the hanging fetch: with an issuer that times out,
// the gateway stalled every request for FetchTimeout of each
// FetchTimeout+KeySetRetry.
func TestFaultStaleSetSlowIssuer(t *testing.T) {
	clk := newClock()
	var (
		mu      sync.Mutex
		hang    bool
		entered = make(chan struct{}, 4)
		release = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := hang
		mu.Unlock()
		if h {
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		writeJSON(w, map[string]any{"keys": []any{keyA().jwk()}})
	}))
	defer srv.Close()
	g := newGate(t, oauthConfig(Issuer{Issuer: "https://as.example.com", JWKSURL: srv.URL}), clk,
		func(o *Options) { o.FetchTimeout = time.Minute })
	claims := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": "https://as.example.com", "sub": "alice", "aud": memory.Resource,
			"scope": "mcp", "exp": clk.Now().Add(2 * time.Hour).Unix()}
	}
	wantOK(t, g.Authenticate(bearer(keyA().sign(t, claims())), memory), "alice")

	clk.Advance(time.Hour + time.Second) // the set is due
	mu.Lock()
	hang = true
	mu.Unlock()
	tok := keyA().sign(t, claims())
	first := make(chan Decision, 1)
	go func() { first <- g.Authenticate(bearer(tok), memory) }()
	<-entered // the refetch hangs

	second := make(chan Decision, 1)
	go func() { second <- g.Authenticate(bearer(tok), memory) }()
	select {
	case d := <-second:
		wantOK(t, d, "alice")
	case <-time.After(5 * time.Second):
		t.Error("a request waited for the hanging refetch of a set it could use")
		defer func() { <-second }()
	}
	close(release)
	wantOK(t, <-first, "alice")
}

// TestFaultAudienceAlias: a token for a target's legacy /sse URL (the
// resource an SSE client asks for, Target.Aliases) is good on every URL of
// that target, in both the JWT and the introspection paths; one for another
// target's /sse URL, or for the alias spelled as another URL, is not.
func TestFaultAudienceAlias(t *testing.T) {
	clk := newClock()
	mem := memory
	mem.Aliases = []string{"https://gw.example.com/servers/memory/sse"}
	gh := github
	gh.Aliases = []string{"https://gw.example.com/servers/github/sse"}
	f := newFakeIssuer(t, keyA())
	g := newGate(t, oauthConfig(Issuer{Issuer: f.issuer}), clk)
	sign := func(aud string) string { return keyA().sign(t, f.claims(clk, map[string]any{"aud": aud})) }
	for _, aud := range []string{"https://gw.example.com/servers/memory/sse", "HTTPS://gw.example.com:443/servers/memory/sse/"} {
		if d := g.Authenticate(bearer(sign(aud)), mem); d.Status != 0 {
			t.Errorf("aud %q on its target: %+v, want accepted", aud, d)
		}
		wantRefused(t, g.Authenticate(bearer(sign(aud)), gh), http.StatusUnauthorized, "does not include", gh.Resource)
		// Without the alias (as before it existed) the /sse URL is another resource.
		wantRefused(t, g.Authenticate(bearer(sign(aud)), memory), http.StatusUnauthorized, "does not include", memory.Resource)
	}
	for _, aud := range []string{"https://gw.example.com/servers/memory/sse/x", "https://gw.example.com/servers/memory/messages", "https://gw.example.com/servers/memory"} {
		wantRefused(t, g.Authenticate(bearer(sign(aud)), mem), http.StatusUnauthorized, "does not include", mem.Resource)
	}

	fi := newFakeIntrospection(t)
	fi.set("tok-sse", map[string]any{"active": true, "sub": "alice", "aud": "https://gw.example.com/servers/memory/sse", "scope": "mcp"})
	gi := newGate(t, introspectionConfig(fi), clk)
	wantOK(t, gi.Authenticate(bearer("tok-sse"), mem), "alice")
	wantRefused(t, gi.Authenticate(bearer("tok-sse"), gh), http.StatusUnauthorized, "does not include", gh.Resource)
}
