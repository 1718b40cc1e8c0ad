package authserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/seal"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The protocol tests' world: a Server with a memory store and a clock
// they move, two protected targets, a public and a confidential client,
// and the gateway's own resource server (auth.Gate) trusting the Server
// as the gateway wires it.

const (
	issuer    = "https://gw.example.com"
	memoryURL = "https://gw.example.com/servers/memory/mcp"
	filesURL  = "https://gw.example.com/servers/files/mcp"
	appID     = "app"
	appRedir  = "https://app.example.com/cb"
	confID    = "conf"
	confSec   = "s3cret-of-the-confidential-client"
	verifier  = "the-code-verifier-of-the-test-client-43-chars-or-more"
)

// world is a Server under test and what talks to it.
type world struct {
	t     *testing.T
	s     *Server
	clk   *testkit.Clock
	store Store
	gate  *auth.Gate
}

func testConfig() config.AuthServer {
	cfg := *config.NewAuthServer()
	cfg.Issuer = issuer
	cfg.Scopes = []string{"mcp", "files"}
	cfg.RedirectURIs = config.DefaultRedirectURIs
	cfg.StateFile = config.DefaultStateFile
	return cfg
}

// newWorld builds a Server over store (nil: a new memory store) signing
// with ring (nil: a random ring, so the store's seed).
func newWorld(t *testing.T, ring *seal.Ring, store Store, clk *testkit.Clock) *world {
	t.Helper()
	if clk == nil {
		clk = testkit.NewClock(time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC))
	}
	cfg := testConfig()
	if store == nil {
		store = newMemStore(clk.Now, cfg.AccessTokenTTL)
	}
	s, err := New(cfg, Deps{Ring: ring, Store: store, Now: clk.Now,
		Resources: func() []string { return []string{memoryURL, filesURL} }})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, s: s, clk: clk, store: store}
	ctx := t.Context()
	if err := store.PutClient(ctx, &Client{ID: appID, RedirectURIs: []string{appRedir, "http://127.0.0.1:3000/callback"}, AuthMethod: "none", CreatedAt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := store.PutClient(ctx, &Client{ID: confID, RedirectURIs: []string{appRedir}, AuthMethod: "client_secret_basic", SecretHash: hashOf(confSec), CreatedAt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	w.gate = newTestGate(t, s, clk)
	return w
}

// newTestGate is the gateway's resource server trusting s in process,
// as internal/gateway wires it.
func newTestGate(t *testing.T, s *Server, clk *testkit.Clock) *auth.Gate {
	t.Helper()
	g, err := auth.New(auth.Config{Required: true, Scopes: []string{"mcp"}, Issuers: []auth.Issuer{{
		Issuer: s.Issuer(), Algorithms: []string{"EdDSA"},
		Keys: func() []auth.PublicKey {
			var out []auth.PublicKey
			for _, k := range s.PublicKeys() {
				out = append(out, auth.PublicKey{ID: k.ID, Algorithm: "EdDSA", Key: k.Key})
			}
			return out
		},
		Revoked: s.Revoked,
	}}}, auth.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// challenge is the S256 code challenge of verifier.
func challenge(v string) string {
	h := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// authorizeParams are a good authorization request of the public client.
func authorizeParams() url.Values {
	return url.Values{
		"client_id": {appID}, "redirect_uri": {appRedir}, "response_type": {"code"}, "state": {"st4te"},
		"code_challenge": {challenge(verifier)}, "code_challenge_method": {"S256"}, "resource": {memoryURL},
	}
}

// get serves a GET of path through the Server's Handler.
func (w *world) get(path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	w.s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, issuer+path, nil))
	return rec
}

// authorize sends an authorization request.
func (w *world) authorize(q url.Values) *httptest.ResponseRecorder {
	return w.get("/oauth/authorize?" + q.Encode())
}

// stored is the request /authorize stored and handed to the login pages
// (the stub's redirect names it); the test fails if there is none.
func (w *world) stored(rec *httptest.ResponseRecorder) *AuthRequest {
	w.t.Helper()
	loc, err := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusSeeOther || err != nil || loc.Path != "/oauth/login" {
		w.t.Fatalf("authorize: %d to %q, want a 303 to the sign-in page; body %s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	req, err := w.store.AuthRequest(w.t.Context(), loc.Query().Get("request"))
	if err != nil {
		w.t.Fatalf("the request of %s: %v", loc, err)
	}
	return req
}

// consent does what the login part does on Allow: the user signed in
// and consented, the request stored, and the provider finishes it. It
// returns where the user agent is sent.
func (w *world) consent(req *AuthRequest, user string) *url.URL {
	w.t.Helper()
	req.User, req.AuthTime, req.Consented = user, w.clk.Now(), true
	if err := w.store.PutAuthRequest(w.t.Context(), req, requestTTL); err != nil {
		w.t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	w.s.provider.finish(rec, httptest.NewRequest(http.MethodPost, issuer+"/oauth/consent?request="+req.ID, nil), req)
	loc, err := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusSeeOther || err != nil {
		w.t.Fatalf("finish: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	return loc
}

// code runs the authorization of q to its code.
func (w *world) code(q url.Values) string {
	w.t.Helper()
	loc := w.consent(w.stored(w.authorize(q)), "alice")
	code := loc.Query().Get("code")
	if code == "" {
		w.t.Fatalf("redirect %s has no code", loc)
	}
	return code
}

// post posts form to path (with HTTP Basic when basic is not nil) and
// decodes the JSON answer.
func (w *world) post(path string, form url.Values, basic *[2]string) (int, map[string]any) {
	w.t.Helper()
	r := httptest.NewRequest(http.MethodPost, issuer+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic != nil {
		r.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	rec := httptest.NewRecorder()
	w.s.Handler().ServeHTTP(rec, r)
	var body map[string]any
	if b := bytes.TrimSpace(rec.Body.Bytes()); len(b) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			w.t.Fatalf("POST %s: %d, body %q is not JSON", path, rec.Code, b)
		}
	}
	if rec.Header().Get("Cache-Control") != "no-store" {
		w.t.Errorf("POST %s: Cache-Control %q, want no-store", path, rec.Header().Get("Cache-Control"))
	}
	return rec.Code, body
}

// redeem exchanges code for tokens as the public client.
func (w *world) redeem(code string) (int, map[string]any) {
	return w.post("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {appID},
		"redirect_uri": {appRedir}, "code_verifier": {verifier}, "resource": {memoryURL}}, nil)
}

// tokens runs the whole flow of the public client for memory: access
// and refresh tokens.
func (w *world) tokens() (access, refresh string) {
	w.t.Helper()
	status, body := w.redeem(w.code(authorizeParams()))
	access, _ = body["access_token"].(string)
	refresh, _ = body["refresh_token"].(string)
	if status != http.StatusOK || access == "" || refresh == "" {
		w.t.Fatalf("token: %d %v", status, body)
	}
	return access, refresh
}

// refresh uses a refresh token as the public client.
func (w *world) refresh(token string, extra url.Values) (int, map[string]any) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {appID}}
	for k, v := range extra {
		form[k] = v
	}
	return w.post("/oauth/token", form, nil)
}

// check asks the gate about access for target resource.
func (w *world) check(access, resource string) auth.Decision {
	r := httptest.NewRequest(http.MethodPost, resource, nil)
	r.Header.Set("Authorization", "Bearer "+access)
	name := strings.TrimSuffix(strings.TrimPrefix(resource, issuer+"/servers/"), "/mcp")
	return w.gate.Authenticate(r, auth.Target{Kind: "server", Name: name, Resource: resource})
}

// wantAccepted fails unless the gate lets access through to resource as
// alice.
func (w *world) wantAccepted(access, resource string) {
	w.t.Helper()
	if d := w.check(access, resource); d.Status != 0 || d.Principal == nil || d.Principal.Name != "alice" {
		w.t.Fatalf("gate for %s: %+v, want alice let through", resource, d)
	}
}

// wantRefused fails unless the gate refuses access to resource with a
// reason containing part.
func (w *world) wantRefused(access, resource, part string) {
	w.t.Helper()
	if d := w.check(access, resource); d.Status != http.StatusUnauthorized || !strings.Contains(d.Reason, part) {
		w.t.Fatalf("gate for %s: %+v, want 401 with %q", resource, d, part)
	}
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func newRequest() *http.Request {
	return httptest.NewRequest(http.MethodPost, issuer+"/oauth/consent", nil)
}
