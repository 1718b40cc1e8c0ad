package front

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mcpgate/mcpgate/internal/auth"
)

// Attacks of a hostile client on the front with the real auth.Gate (not
// fakeAuth): token confusion between targets, audience tricks with Host
// and untrusted proxy headers, API keys on endpoints, and principals of
// the same name.

const faultIssuer = "https://as.example.com"
const faultKey = "ci-key-0123456789abcdef"

var (
	faultRSAOnce sync.Once
	faultRSA     *rsa.PrivateKey
)

// faultGate is a real Gate trusting an issuer whose key set an httptest
// server serves, with API key "ci" (server x only).
func faultGate(t *testing.T, cfg auth.Config) *auth.Gate {
	t.Helper()
	faultRSAOnce.Do(func() {
		var err error
		if faultRSA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	enc := base64.RawURLEncoding.EncodeToString
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{
			"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
			"n": enc(faultRSA.N.Bytes()), "e": enc(big.NewInt(int64(faultRSA.E)).Bytes())}}})
	}))
	t.Cleanup(jwks.Close)
	sum := sha256.Sum256([]byte(faultKey))
	cfg.Issuers = []auth.Issuer{{Issuer: faultIssuer, JWKSURL: jwks.URL}}
	cfg.Scopes = []string{"mcp"}
	cfg.Required = true
	cfg.APIKeys = append(cfg.APIKeys, auth.APIKey{Name: "ci", SHA256: hex.EncodeToString(sum[:]), Servers: []string{"x"}})
	g, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// faultToken is a token of sub for audience aud.
func faultToken(t *testing.T, sub, aud string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": faultIssuer, "sub": sub, "aud": aud, "scope": "mcp",
		"exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(faultRSA)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bearerHdr(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// A token for server x opens x only: not the default endpoint (which
// merges x), not another endpoint (even an open one: credentials sent are
// checked), not x under another host or port; and an API key for x opens
// no endpoint.
func TestFaultTokenConfusionFront(t *testing.T) {
	g := faultGate(t, auth.Config{Endpoints: map[string]auth.TargetConfig{"team": {Off: true}}})
	_, srv, backends := authServer(t, g, Config{})
	xTok := faultToken(t, "alice", srv.URL+"/servers/x/mcp")
	modern := initBody
	if resp, body := do(t, srv, http.MethodPost, "/servers/x/mcp", modern, bearerHdr(xTok)...); resp.StatusCode != http.StatusOK {
		t.Fatalf("x with its token: %d %s", resp.StatusCode, body)
	}
	for _, path := range []string{"/mcp", "/endpoints/all/mcp", "/endpoints/team/mcp", "/servers/x/sse"} {
		method, body := http.MethodPost, modern
		if strings.HasSuffix(path, "/sse") {
			continue // the same resource: accepted, checked elsewhere
		}
		if resp, b := do(t, srv, method, path, body, bearerHdr(xTok)...); resp.StatusCode != http.StatusUnauthorized ||
			!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("x's token on %s: %d %s", path, resp.StatusCode, b)
		}
	}
	// Host routing: x.mcp.example.com is another resource URL.
	if resp, b := doHost(t, srv, http.MethodPost, "/mcp", modern, with(bearerHdr(xTok), "Host", "x.mcp.example.com")...); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("x's path token on x's host: %d %s", resp.StatusCode, b)
	}
	// Other ports, the default port, no port.
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	for _, aud := range []string{"http://127.0.0.1/servers/x/mcp", "http://127.0.0.1:1" + port + "/servers/x/mcp",
		"https://127.0.0.1:" + port + "/servers/x/mcp", "http://localhost:" + port + "/servers/x/mcp"} {
		if resp, b := do(t, srv, http.MethodPost, "/servers/x/mcp", modern, bearerHdr(faultToken(t, "alice", aud))...); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("aud %s: %d %s", aud, resp.StatusCode, b)
		}
	}
	// The API key of x: x yes, endpoints never.
	if resp, b := do(t, srv, http.MethodPost, "/servers/x/mcp", modern, bearerHdr(faultKey)...); resp.StatusCode != http.StatusOK {
		t.Errorf("key on x: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/mcp", "/endpoints/all/mcp", "/endpoints/team/mcp"} {
		if resp, b := do(t, srv, http.MethodPost, path, modern, bearerHdr(faultKey)...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("x's key on %s: %d %s", path, resp.StatusCode, b)
		}
	}
	if resp, b := doHost(t, srv, http.MethodPost, "/mcp", modern, with(bearerHdr(faultKey), "Host", "all.mcp.example.com")...); resp.StatusCode != http.StatusForbidden {
		t.Errorf("x's key on the host-routed endpoint: %d %s", resp.StatusCode, b)
	}
	for i, b := range backends[1:] {
		if b.opens.Load() != 0 {
			t.Errorf("endpoint %d opened by a refused request", i)
		}
	}
}

// Without TrustProxyHeaders, X-Forwarded-Host and X-Forwarded-Proto do not
// make the resource URL: a token for the forwarded host is refused, and
// the challenge and the metadata name the real one. With PublicURL, the
// Host header does not either.
func TestFaultForwardedHostUntrusted(t *testing.T) {
	g := faultGate(t, auth.Config{})
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Auth: g})
	modern := initBody
	fwd := []string{"X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https"}
	evilTok := faultToken(t, "alice", "https://evil.example/servers/x/mcp")
	resp, body := do(t, srv, http.MethodPost, mcpPath, modern, with(bearerHdr(evilTok), fwd...)...)
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="https://evil`) {
		t.Errorf("forwarded host's token: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	resp, body = do(t, srv, http.MethodGet, wellKnownPRM+mcpPath, "", fwd...)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "evil") || !strings.Contains(body, `"resource":"`+srv.URL+mcpPath+`"`) {
		t.Errorf("metadata with forwarded headers: %d %s", resp.StatusCode, body)
	}

	// With PublicURL, neither Host nor forwarded headers move the resource.
	g2 := faultGate(t, auth.Config{})
	_, srv2 := testServer(t, newFakeBackend(), Config{Auth: g2, PublicURL: "https://mcp.example.com/gw"})
	good := faultToken(t, "alice", "https://mcp.example.com/gw/servers/x/mcp")
	if resp, body := doHost(t, srv2, http.MethodPost, mcpPath, modern, with(bearerHdr(good), "Host", "evil.example")...); resp.StatusCode != http.StatusOK {
		t.Errorf("public URL token with a forged Host: %d %s", resp.StatusCode, body)
	}
	for _, aud := range []string{"http://evil.example/servers/x/mcp", "https://mcp.example.com/servers/x/mcp", srv2.URL + mcpPath} {
		if resp, body := doHost(t, srv2, http.MethodPost, mcpPath, modern, with(bearerHdr(faultToken(t, "alice", aud)), "Host", "evil.example")...); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("aud %s with Host evil.example: %d %s", aud, resp.StatusCode, body)
		}
	}
}

// A token whose subject is an API key's name is another principal: it
// cannot use the key's session (nor the key the token's).
func TestFaultSessionKeyVersusToken(t *testing.T) {
	g := faultGate(t, auth.Config{})
	b := newFakeBackend()
	b.version = "2025-11-25"
	_, srv := testServer(t, b, Config{Auth: g})
	resp, body := do(t, srv, http.MethodPost, mcpPath, initBody, bearerHdr(faultKey)...)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	hdr := func(cred []string) []string {
		return with(cred, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	}
	impostor := bearerHdr(faultToken(t, "ci", srv.URL+mcpPath))
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		body := ""
		if m == http.MethodPost {
			body = ping
		}
		if resp, b := do(t, srv, m, mcpPath, body, with(hdr(impostor), "Accept", "text/event-stream, application/json")...); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s by the token named ci: %d %s", m, resp.StatusCode, b)
		}
	}
	if resp, b := do(t, srv, http.MethodPost, mcpPath, ping, hdr(bearerHdr(faultKey))...); resp.StatusCode != http.StatusOK {
		t.Errorf("the key's own POST: %d %s", resp.StatusCode, b)
	}
}

// The metadata documents say nothing of unknown or open targets: the same
// 404 for both, no issuer named; and a refusal of an open target with bad
// credentials names no metadata document.
func TestFaultMetadataLeaks(t *testing.T) {
	g := faultGate(t, auth.Config{Endpoints: map[string]auth.TargetConfig{"team": {Off: true}}})
	_, srv, _ := authServer(t, g, Config{})
	for _, path := range []string{"/endpoints/team/mcp", "/endpoints/team/sse", "/endpoints/nope/mcp", "/servers/nope/mcp", "/servers/nope/sse", "/servers/x/messages", "/servers/x/mcp/extra"} {
		resp, body := do(t, srv, http.MethodGet, wellKnownPRM+path, "")
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, faultIssuer) || strings.Contains(body, "authorization_servers") {
			t.Errorf("metadata of %s: %d %s", path, resp.StatusCode, body)
		}
	}
	// Host-routed to an open endpoint: no document either.
	if resp, body := doHost(t, srv, http.MethodGet, wellKnownPRM, "", "Host", "team.mcp.example.com"); resp.StatusCode != http.StatusNotFound || strings.Contains(body, faultIssuer) {
		t.Errorf("host-routed open endpoint metadata: %d %s", resp.StatusCode, body)
	}
	// An open endpoint passes nobody, and refuses a bad token.
	modern := initBody
	if resp, body := do(t, srv, http.MethodPost, "/endpoints/team/mcp", modern); resp.StatusCode != http.StatusOK {
		t.Errorf("open endpoint without credentials: %d %s", resp.StatusCode, body)
	}
	resp, body := do(t, srv, http.MethodPost, "/endpoints/team/mcp", modern, bearerHdr("not-a-key-nor-a-token")...)
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata") {
		t.Errorf("open endpoint with a bad token: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	// A refusal never echoes the token.
	tok := faultToken(t, "alice", "https://elsewhere.example/mcp")
	resp, body = do(t, srv, http.MethodPost, "/servers/x/mcp", modern, bearerHdr(tok)...)
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, tok) || strings.Contains(resp.Header.Get("WWW-Authenticate"), tok[:40]) {
		t.Errorf("refusal: %d %s", resp.StatusCode, body)
	}
}
