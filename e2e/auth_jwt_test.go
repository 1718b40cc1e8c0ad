package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// signingKey is a key of the test's authorization server: its key id, JWS algorithm and private
// half.
type signingKey struct {
	kid  string
	alg  jwt.SigningMethod
	priv crypto.Signer
}

func newECKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jwt.SigningMethodES256, priv: k}
}

func newRSAKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jwt.SigningMethodRS256, priv: k}
}

// jwk is the public JSON Web Key (RFC 7517) of k.
func (k signingKey) jwk() map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	m := map[string]any{"kid": k.kid, "use": "sig", "alg": k.alg.Alg()}
	switch pub := k.priv.Public().(type) {
	case *ecdsa.PublicKey:
		point, err := pub.Bytes() // 0x04 || X || Y, each fixed-size
		if err != nil {
			panic(err)
		}
		size := (len(point) - 1) / 2
		m["kty"], m["crv"] = "EC", pub.Curve.Params().Name
		m["x"], m["y"] = b64(point[1:1+size]), b64(point[1+size:])
	case *rsa.PublicKey:
		m["kty"] = "RSA"
		m["n"], m["e"] = b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
	default:
		panic(fmt.Sprintf("unexpected key type %T", pub))
	}
	return m
}

// sign returns a JWT of claims signed by k, naming k's key id.
func (k signingKey) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.alg, claims)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testIssuer is an authorization server of the test's own, on loopback (httptest): its RFC 8414
// metadata (issuer and jwks_uri, which the gateway discovers) and its JSON Web Key Set, which the
// test replaces to rotate keys. It counts the fetches of the set.
type testIssuer struct {
	srv *httptest.Server

	mu      sync.Mutex
	keys    []signingKey
	fetches int
}

func startTestIssuer(t *testing.T, keys ...signingKey) *testIssuer {
	t.Helper()
	is := &testIssuer{keys: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                is.srv.URL,
			"jwks_uri":                              is.srv.URL + "/jwks",
			"authorization_endpoint":                is.srv.URL + "/authorize",
			"token_endpoint":                        is.srv.URL + "/token",
			"response_types_supported":              []string{"code"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		is.fetches++
		set := []any{}
		for _, k := range is.keys {
			set = append(set, k.jwk())
		}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": set})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *testIssuer) publish(keys ...signingKey) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = keys
}

func (is *testIssuer) fetchCount() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.fetches
}

// claims returns the claims of a token of is for resource, valid for 10 minutes, with subject
// sub; extra entries replace or (with a nil value) remove claims.
func (is *testIssuer) claims(sub, resource string, extra map[string]any) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{
		"iss":   is.srv.URL,
		"sub":   sub,
		"aud":   resource,
		"iat":   now.Unix(),
		"nbf":   now.Add(-time.Minute).Unix(),
		"exp":   now.Add(10 * time.Minute).Unix(),
		"scope": "mcp:tools",
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestAuthJWT: the gateway trusts an authorization server of the test, whose JWTs it checks
// against the key set it discovers from the issuer's metadata (RFC 8414 jwks_uri), signed here
// with golang-jwt (the library internal/auth uses for verification; the keys and the set are the
// test's). A good token (ES256) serves ten TypeScript SDK clients sending it as a static header,
// and the Go SDK client in both eras (2026-07-28 stateless requests, 2025-11-25 sessions); a
// remote upstream (the Go SDK's server over HTTP, recording headers) never receives the client's
// token or API key. Every
// way a token can be wrong gets 401 with an invalid_token challenge whose resource_metadata is
// absolute: expired, not yet valid, without exp, for another resource of the gateway, for
// another origin, from an untrusted issuer, signed by a key not in the set, with its payload or
// signature altered, unsigned (alg none), HMAC-signed with the public key as secret, without a
// subject. Another subject's token cannot use a session (404). Keys rotate: the two published
// keys (ES256, RS256) each verify by key id; when the issuer retires k1 and signs with a new k3 at
// once, the first k3 token makes the gateway fetch the set again (exactly once) and is accepted,
// k1's tokens are refused from then on, and tokens with made-up key ids right after do not make
// it fetch the set again (they cannot make it hammer the issuer).
func TestAuthJWT(t *testing.T) {
	requirePeers(t, node22, serverEverything, everythingServer)
	k1, k2 := newECKey(t, "k1"), newRSAKey(t, "k2")
	is := startTestIssuer(t, k1, k2)
	upstream := startRecordingUpstream(t)
	base := startGateway(t, map[string]any{
		"mcpServers": map[string]any{
			"everything": map[string]any{"command": node22, "args": []string{serverEverything, "stdio"}},
			"conf":       map[string]any{"command": everythingServer},
			"remote":     map[string]any{"type": "http", "url": upstream.url},
		},
		"gateway": map[string]any{"auth": map[string]any{
			"oauth":   map[string]any{"issuers": []any{map[string]any{"issuer": is.srv.URL}}},
			"apiKeys": []any{ciKey.config()},
		}},
	})
	url := base + "/servers/everything/mcp"
	good := k1.sign(t, is.claims("alice", url, nil))

	t.Run("metadata", func(t *testing.T) {
		checkResourceMetadata(t, url, is.srv.URL)
	})

	t.Run("typescript", func(t *testing.T) {
		script := installScript(t, everythingClientScript)
		runEverythingClient(t, script, url, "--header", "Authorization: Bearer "+good)
	})

	t.Run("gosdk", func(t *testing.T) {
		confURL := base + "/servers/conf/mcp"
		token := k1.sign(t, is.claims("alice", confURL, nil))
		for _, era := range []string{eraModern, eraSession} {
			t.Run(era, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				client := mcp.NewClient(&mcp.Implementation{Name: "e2e-jwt", Version: "1"}, nil)
				cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
					Endpoint: confURL, DisableStandaloneSSE: true,
					HTTPClient: &http.Client{Transport: bearerTransport{token}},
				}, &mcp.ClientSessionOptions{ProtocolVersion: era})
				if err != nil {
					t.Fatalf("connect with the token: %v", err)
				}
				defer cs.Close()
				if got := cs.InitializeResult().ProtocolVersion; got != era {
					t.Errorf("negotiated %q, want %q", got, era)
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
				if err != nil || res.IsError || len(res.Content) == 0 {
					t.Fatalf("test_simple_text: %v %+v", err, res)
				}
				// Without the token the same client is refused.
				if _, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: confURL, DisableStandaloneSSE: true},
					&mcp.ClientSessionOptions{ProtocolVersion: era}); err == nil {
					t.Error("connected without a token")
				}
			})
		}
	})

	t.Run("not-forwarded", func(t *testing.T) {
		// The client's credentials end at the gateway: a remote upstream sees neither the token
		// nor the API key, in either era.
		remoteURL := base + "/servers/remote/mcp"
		token := k1.sign(t, is.claims("alice", remoteURL, nil))
		for _, cred := range []struct{ name, secret string }{{"token", token}, {"API key", ciKey.secret}} {
			for _, era := range []string{eraModern, eraSession} {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				client := mcp.NewClient(&mcp.Implementation{Name: "e2e-jwt", Version: "1"}, nil)
				cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
					Endpoint: remoteURL, DisableStandaloneSSE: true,
					HTTPClient: &http.Client{Transport: bearerTransport{cred.secret}},
				}, &mcp.ClientSessionOptions{ProtocolVersion: era})
				if err != nil {
					cancel()
					t.Fatalf("%s, %s: connect: %v", cred.name, era, err)
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "headers"})
				if err != nil || res.IsError {
					t.Errorf("%s, %s: the remote's tool: %v %+v", cred.name, era, err, res)
				}
				cs.Close()
				cancel()
			}
		}
		requests, leaked := upstream.report(token, ciKey.secret)
		if requests == 0 {
			t.Fatal("the remote upstream received no request")
		}
		for _, l := range leaked {
			t.Errorf("the remote upstream received the client's credentials: %s", l)
		}
		t.Logf("the remote upstream received %d requests, none with the client's token or API key", requests)
	})

	t.Run("refused", func(t *testing.T) {
		now := time.Now()
		stranger := newECKey(t, "k1") // the same key id, another key
		parts := strings.Split(good, ".")
		otherPayload := strings.Split(k1.sign(t, is.claims("mallory", url, nil)), ".")[1]
		header := func(alg string) string {
			return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"alg":%q,"typ":"JWT","kid":"k1"}`, alg))
		}
		payload := base64.RawURLEncoding.EncodeToString(mustJSON(t, is.claims("alice", url, nil)))
		// HS256 keyed with the issuer's public key: the classic algorithm confusion.
		pubJSON := mustJSON(t, k1.jwk())
		mac := hmac.New(sha256.New, pubJSON)
		mac.Write([]byte(header("HS256") + "." + payload))
		hs256 := header("HS256") + "." + payload + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))

		for _, tc := range []struct{ name, token string }{
			{"expired", k1.sign(t, is.claims("alice", url, map[string]any{"exp": now.Add(-10 * time.Minute).Unix(), "iat": now.Add(-20 * time.Minute).Unix(), "nbf": nil}))},
			{"not yet valid", k1.sign(t, is.claims("alice", url, map[string]any{"nbf": now.Add(10 * time.Minute).Unix()}))},
			{"no expiry", k1.sign(t, is.claims("alice", url, map[string]any{"exp": nil}))},
			{"another resource of the gateway", k1.sign(t, is.claims("alice", base+"/servers/conf/mcp", nil))},
			{"the resource on another origin", k1.sign(t, is.claims("alice", "http://127.0.0.1:1/servers/everything/mcp", nil))},
			{"no audience", k1.sign(t, is.claims("alice", url, map[string]any{"aud": nil}))},
			{"untrusted issuer", k1.sign(t, is.claims("alice", url, map[string]any{"iss": "http://127.0.0.1:1"}))},
			{"key not in the set", stranger.sign(t, is.claims("alice", url, nil))},
			{"payload altered", parts[0] + "." + otherPayload + "." + parts[2]},
			{"signature altered", parts[0] + "." + parts[1] + "." + flipChar(parts[2])},
			{"unsigned (alg none)", header("none") + "." + payload + "."},
			{"HS256 with the public key as secret", hs256},
			{"no subject", k1.sign(t, is.claims("", url, map[string]any{"sub": nil}))},
		} {
			r := mcpDo(t, http.MethodPost, url, "Bearer "+tc.token, "", initializeRequest(1))
			h := r.header.Get("WWW-Authenticate")
			if r.status != http.StatusUnauthorized || !strings.Contains(h, `error="invalid_token"`) {
				t.Errorf("%s: %d, WWW-Authenticate %q; want 401 invalid_token: %s", tc.name, r.status, h, brief(r.body))
				continue
			}
			if m := regexp.MustCompile(`resource_metadata="([^"]*)"`).FindStringSubmatch(h); m == nil || m[1] != base+"/.well-known/oauth-protected-resource/servers/everything/mcp" {
				t.Errorf("%s: WWW-Authenticate %q: want resource_metadata=%q", tc.name, h, base+"/.well-known/oauth-protected-resource/servers/everything/mcp")
			}
			t.Logf("%s: 401: %s", tc.name, h)
		}
		// The control: the same request with the good token.
		if r := mcpDo(t, http.MethodPost, url, "Bearer "+good, "", initializeRequest(1)); r.status != http.StatusOK {
			t.Errorf("the good token: %d: %s", r.status, brief(r.body))
		}
	})

	t.Run("hijack", func(t *testing.T) {
		bob := k1.sign(t, is.claims("bob", url, nil))
		sid := openSession(t, url, "Bearer "+good)
		checkHijack(t, url, sid, "Bearer "+good, "Bearer "+bob)
		// The same subject with another token (a refreshed one) is the same principal.
		again := k1.sign(t, is.claims("alice", url, map[string]any{"jti": "refreshed"}))
		if r := mcpDo(t, http.MethodPost, url, "Bearer "+again, sid, toolsListRequest(11)); r.status != http.StatusOK {
			t.Errorf("the owner's new token in its session: %d, want 200: %s", r.status, brief(r.body))
		}
	})

	t.Run("rotation", func(t *testing.T) {
		// Both published keys verify, each by its key id (ES256 and RS256).
		for _, k := range []signingKey{k1, k2} {
			if r := mcpDo(t, http.MethodPost, url, "Bearer "+k.sign(t, is.claims("alice", url, nil)), "", initializeRequest(1)); r.status != http.StatusOK {
				t.Errorf("token of published key %s (%s): %d, want 200: %s", k.kid, k.alg.Alg(), r.status, brief(r.body))
			}
		}
		before := is.fetchCount()
		if before != 1 {
			t.Errorf("the key set was fetched %d times before the rotation, want once (every token so far named a key of the first fetch)", before)
		}
		// The issuer rotates: k1 retired, k3 new, and signs with k3 at once. The gateway's set
		// (fetched above) lacks k3, so the first k3 token makes it fetch the set again.
		k3 := newECKey(t, "k3")
		is.publish(k2, k3)
		r := mcpDo(t, http.MethodPost, url, "Bearer "+k3.sign(t, is.claims("alice", url, nil)), "", initializeRequest(1))
		t.Logf("token of the new key k3: %d; key set fetched %d time(s) before, %d after: %s",
			r.status, before, is.fetchCount(), r.header.Get("WWW-Authenticate"))
		if r.status != http.StatusOK || is.fetchCount() != before+1 {
			t.Fatalf("token of the newly published key k3: %d after %d fetch(es) of the key set; want 200 after exactly 1: %s",
				r.status, is.fetchCount()-before, r.header.Get("WWW-Authenticate"))
		}
		// The set the gateway holds now has no k1: its tokens are refused; k2's still work.
		if r := mcpDo(t, http.MethodPost, url, "Bearer "+good, "", initializeRequest(1)); r.status != http.StatusUnauthorized {
			t.Errorf("token of the retired key k1 after the refetch: %d, want 401: %s", r.status, brief(r.body))
		}
		if r := mcpDo(t, http.MethodPost, url, "Bearer "+k2.sign(t, is.claims("alice", url, nil)), "", initializeRequest(1)); r.status != http.StatusOK {
			t.Errorf("token of k2, kept through the rotation: %d, want 200: %s", r.status, brief(r.body))
		}
		// Made-up key ids right after that refetch do not make the gateway fetch the set again:
		// tokens cannot make it hammer the issuer.
		made := is.fetchCount()
		for i := range 5 {
			fake := newECKey(t, fmt.Sprintf("made-up-%d", i))
			if r := mcpDo(t, http.MethodPost, url, "Bearer "+fake.sign(t, is.claims("alice", url, nil)), "", initializeRequest(1)); r.status != http.StatusUnauthorized {
				t.Errorf("a token of made-up key id %s: %d, want 401", fake.kid, r.status)
			}
		}
		if n := is.fetchCount() - made; n != 0 {
			t.Errorf("5 tokens with made-up key ids right after a refetch made the gateway fetch the key set %d more times, want 0", n)
		}
	})
}

// recordingUpstream is a remote MCP server (the Go SDK's, Streamable HTTP, on loopback) that
// records the headers of every request it receives. Its one tool, "headers", answers "ok".
type recordingUpstream struct {
	url string

	mu      sync.Mutex
	headers []http.Header
}

func startRecordingUpstream(t *testing.T) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{}
	server := mcp.NewServer(&mcp.Implementation{Name: "recording-upstream", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "headers", Description: "answers ok"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// report returns how many requests the upstream received and, for each that carried an
// Authorization header or any of the secrets in any header, a description (never the secret).
func (u *recordingUpstream) report(secrets ...string) (requests int, leaked []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, h := range u.headers {
		if v := h.Get("Authorization"); v != "" {
			leaked = append(leaked, fmt.Sprintf("request %d has an Authorization header (%d bytes)", i, len(v)))
		}
		for name, values := range h {
			for _, v := range values {
				for j, s := range secrets {
					if strings.Contains(v, s) {
						leaked = append(leaked, fmt.Sprintf("request %d: header %s holds secret %d", i, name, j))
					}
				}
			}
		}
	}
	return len(u.headers), leaked
}

// flipChar changes the first character of s (a base64url string) to another base64url character.
func flipChar(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
