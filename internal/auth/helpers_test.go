package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// clock is a clock tests move by hand: expiry is tested without sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// signer is an issuer's signing key.
type signer struct {
	kid string
	alg string
	key crypto.Signer
}

// Keys are made once: RSA key generation is slow.
var (
	keysOnce sync.Once
	rsaA     *rsa.PrivateKey
	rsaB     *rsa.PrivateKey
	ecKey    *ecdsa.PrivateKey
	ec384Key *ecdsa.PrivateKey
	edKey    ed25519.PrivateKey
)

func testKeys() {
	keysOnce.Do(func() {
		var err error
		if rsaA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaB, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if ec384Key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader); err != nil {
			panic(err)
		}
		if _, edKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	})
}

func keyA() signer     { testKeys(); return signer{"A", "RS256", rsaA} }
func keyB() signer     { testKeys(); return signer{"B", "RS256", rsaB} }
func keyEC() signer    { testKeys(); return signer{"E", "ES256", ecKey} }
func keyEC384() signer { testKeys(); return signer{"E384", "ES384", ec384Key} }
func keyEd() signer    { testKeys(); return signer{"D", "EdDSA", edKey} }

// jwk is the signer's public key as a JSON Web Key.
func (s signer) jwk() map[string]any {
	enc := base64.RawURLEncoding.EncodeToString
	k := map[string]any{"kid": s.kid, "use": "sig", "alg": s.alg}
	switch pub := s.key.Public().(type) {
	case *rsa.PublicKey:
		k["kty"], k["n"], k["e"] = "RSA", enc(pub.N.Bytes()), enc(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		b, _ := pub.Bytes()
		size := (len(b) - 1) / 2
		k["kty"], k["crv"], k["x"], k["y"] = "EC", pub.Curve.Params().Name, enc(b[1:1+size]), enc(b[1+size:])
	case ed25519.PublicKey:
		k["kty"], k["crv"], k["x"] = "OKP", "Ed25519", enc(pub)
	}
	return k
}

// sign makes a JWT of claims signed by s, its kid in the header.
func (s signer) sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(s.alg), claims)
	tok.Header["kid"] = s.kid
	out, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fakeIssuer is an authorization server: its metadata (RFC 8414, at the
// path-inserted URL) and its key set, which tests rotate, counting
// fetches.
type fakeIssuer struct {
	srv    *httptest.Server
	issuer string // srv.URL + "/realms/mcp"

	mu          sync.Mutex
	keys        []map[string]any
	jwksStatus  int // 0: 200
	jwksFetches int
	metaFetches int
	metaIssuer  string // the issuer the metadata names; "" for the right one
	mux         *http.ServeMux
}

func newFakeIssuer(t testing.TB, keys ...signer) *fakeIssuer {
	t.Helper()
	f := &fakeIssuer{mux: http.NewServeMux()}
	f.setKeys(keys...)
	f.mux.HandleFunc("/.well-known/oauth-authorization-server/realms/mcp", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.metaFetches++
		iss := f.metaIssuer
		f.mu.Unlock()
		if iss == "" {
			iss = f.issuer
		}
		writeJSON(w, map[string]any{"issuer": iss, "jwks_uri": f.srv.URL + "/realms/mcp/certs",
			"token_endpoint": f.issuer + "/token"})
	})
	f.mux.HandleFunc("/realms/mcp/certs", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.jwksFetches++
		status, keys := f.jwksStatus, f.keys
		f.mu.Unlock()
		if status != 0 {
			http.Error(w, "down", status)
			return
		}
		writeJSON(w, map[string]any{"keys": keys})
	})
	f.srv = httptest.NewServer(f.mux)
	t.Cleanup(f.srv.Close)
	f.issuer = f.srv.URL + "/realms/mcp"
	return f
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// setKeys replaces the published key set (a rotation).
func (f *fakeIssuer) setKeys(keys ...signer) {
	set := []map[string]any{
		// An encryption key, as Keycloak publishes: never used.
		{"kty": "RSA", "kid": "enc", "use": "enc", "alg": "RSA-OAEP", "n": "AQAB", "e": "AQAB"},
	}
	for _, k := range keys {
		set = append(set, k.jwk())
	}
	f.mu.Lock()
	f.keys = set
	f.mu.Unlock()
}

func (f *fakeIssuer) fetches() (jwks, meta int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jwksFetches, f.metaFetches
}

func (f *fakeIssuer) setStatus(status int) {
	f.mu.Lock()
	f.jwksStatus = status
	f.mu.Unlock()
}

// The targets of the tests, as the front names them.
var (
	memory = Target{Kind: "server", Name: "memory",
		Resource: "https://gw.example.com/servers/memory/mcp",
		Metadata: "https://gw.example.com/.well-known/oauth-protected-resource/servers/memory/mcp"}
	github = Target{Kind: "server", Name: "github",
		Resource: "https://gw.example.com/servers/github/mcp",
		Metadata: "https://gw.example.com/.well-known/oauth-protected-resource/servers/github/mcp"}
	team = Target{Kind: "endpoint", Name: "team",
		Resource: "https://gw.example.com/endpoints/team/mcp",
		Metadata: "https://gw.example.com/.well-known/oauth-protected-resource/endpoints/team/mcp"}
)

// claims are a valid token's claims for memory from f, at clk's time,
// with changes (a nil value deletes the claim).
func (f *fakeIssuer) claims(clk *clock, changes map[string]any) jwt.MapClaims {
	now := clk.Now()
	c := jwt.MapClaims{
		"iss":   f.issuer,
		"sub":   "alice",
		"aud":   memory.Resource,
		"exp":   now.Add(time.Hour).Unix(),
		"iat":   now.Unix(),
		"scope": "mcp profile",
	}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// newGate returns the Gate of cfg on clk, closed at the end of the test.
func newGate(t *testing.T, cfg Config, clk *clock, edit ...func(*Options)) *Gate {
	t.Helper()
	opts := Options{Now: clk.Now}
	for _, e := range edit {
		e(&opts)
	}
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

// oauthConfig trusts issuers, requiring scope "mcp" everywhere.
func oauthConfig(issuers ...Issuer) Config {
	return Config{Issuers: issuers, Scopes: []string{"mcp"}, Required: true}
}

// request is a request with this Authorization header ("" for none).
func request(authorization string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "https://gw.example.com/servers/memory/mcp", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

// bearer is a request with this bearer token.
func bearer(token string) *http.Request { return request("Bearer " + token) }

// wantOK checks that d lets the request go on as the principal named.
func wantOK(t *testing.T, d Decision, name string) *Principal {
	t.Helper()
	if d.Status != 0 || d.Principal == nil {
		t.Fatalf("decision %+v, want principal %q", d, name)
	}
	if d.Principal.Name != name {
		t.Fatalf("principal %q, want %q", d.Principal.Name, name)
	}
	return d.Principal
}

// wantRefused checks d's status, and that its reason has each of parts.
func wantRefused(t *testing.T, d Decision, status int, parts ...string) {
	t.Helper()
	if d.Status != status || d.Principal != nil {
		t.Fatalf("decision %+v, want status %d", d, status)
	}
	for _, p := range parts {
		if !strings.Contains(d.Reason, p) {
			t.Errorf("reason %q lacks %q", d.Reason, p)
		}
	}
}
