package gateway

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/authserver"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestAuthServerThroughGateway: a config with gateway.auth.server and
// two protected stdio servers. The server's metadata is served on the
// main listener, the protected resource metadata names it, and a token
// from its code flow calls tools/call on the server it is for, not on
// the other; revoked, it is refused at once.
func TestAuthServerThroughGateway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}), fakeServer("b", testkit.FakeOptions{}))
	cfg.Gateway.Auth = config.NewAuth()
	cfg.Gateway.Auth.PublicURL = base
	as := config.NewAuthServer()
	as.Issuer, as.Scopes, as.SignInCode = base, []string{"mcp"}, true
	as.RedirectURIs, as.StateFile = config.DefaultRedirectURIs, filepath.Join(t.TempDir(), config.DefaultStateFile)
	cfg.Gateway.Auth.Server = as
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := Start(cfg, testLogger(t))
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	g := serveTest(t, gw, ln, gw.serve)
	noRedirect := &http.Client{Transport: g.http.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	var meta map[string]any
	getJSON(t, g.http, base+"/.well-known/oauth-authorization-server", &meta)
	if meta["issuer"] != base || meta["token_endpoint"] != base+"/oauth/token" {
		t.Fatalf("metadata %v", meta)
	}
	var prm struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	getJSON(t, g.http, base+"/.well-known/oauth-protected-resource/servers/a/mcp", &prm)
	if !slices.Equal(prm.AuthorizationServers, []string{base}) {
		t.Fatalf("protected resource metadata names %v, want [%s]", prm.AuthorizationServers, base)
	}

	// A client (registration is the clients part's; here it is stored)
	// asks for a token for server a.
	ctx := t.Context()
	const redirect = "http://127.0.0.1:9/cb"
	if err := gw.authStore.PutClient(ctx, &authserver.Client{ID: "app", RedirectURIs: []string{redirect}, AuthMethod: "none", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	verifier := strings.Repeat("v", 50)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"client_id": {"app"}, "redirect_uri": {redirect}, "response_type": {"code"}, "state": {"s"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {base + "/servers/a/mcp"}}
	resp, err := noRedirect.Get(base + "/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Path != "/oauth/login" {
		t.Fatalf("authorize: %d to %q, want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The sign-in and consent pages are the login part's (its form
	// contract is driven end to end in e2e/): here the request is
	// consented and its code stored as provider.finish does.
	req, err := gw.authStore.AuthRequest(ctx, loc.Query().Get("request"))
	if err != nil {
		t.Fatal(err)
	}
	// The one who may sign in: no users configured, so the owner of the
	// one-time code (the gate refuses a user the config does not know).
	// The request names its one code (the last answer's: one request
	// answers once).
	const code = "a-code-of-the-test"
	req.User, req.AuthTime, req.Consented = "owner", time.Now(), true
	req.Code = authserver.Hash(sha256.Sum256([]byte(code)))
	if err := gw.authStore.PutAuthRequest(ctx, req, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := gw.authStore.PutCode(ctx, req.Code, req.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	postForm(t, g.http, base+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {"app"},
		"redirect_uri": {redirect}, "code_verifier": {verifier}}, http.StatusOK, &tok)

	c := g.client("a")
	c.header.Set("Authorization", "Bearer "+tok.AccessToken)
	c.connect(t)
	if got := toolText(t, c.post(t, callBody("1", "echo", map[string]any{"message": "through the gate"}, "")).final(t)); got != "through the gate" {
		t.Fatalf("echo: %q", got)
	}
	other := g.client("b")
	other.header.Set("Authorization", "Bearer "+tok.AccessToken)
	r := other.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	if r.Status != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("the token of a on b: %d %q, want 401 invalid_token", r.Status, r.Header.Get("WWW-Authenticate"))
	}

	// Revoked by its client: the next call is refused.
	postForm(t, g.http, base+"/oauth/revoke", url.Values{"token": {tok.RefreshToken}, "client_id": {"app"}}, http.StatusOK, nil)
	if r := c.post(t, callBody("2", "echo", map[string]any{"message": "after"}, "")); r.Status != http.StatusUnauthorized {
		t.Fatalf("after revocation: %d, want 401", r.Status)
	}
}

// getJSON GETs url and decodes its JSON into v, failing unless 200.
func getJSON(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// postForm posts form to url, failing unless status; decodes the JSON
// answer into v when v is not nil.
func postForm(t *testing.T, c *http.Client, url string, form url.Values, status int, v any) {
	t.Helper()
	resp, err := c.PostForm(url, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != status {
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, body, status)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("POST %s: %s: %v", url, body, err)
		}
	}
}

// TestAuthServerReloadNeedsRestart: the authorization server is built
// once; a reload that adds, changes or drops gateway.auth.server says a
// restart applies it, and one that leaves it alone says nothing of it.
func TestAuthServerReloadNeedsRestart(t *testing.T) {
	with := func(users ...string) config.Gateway {
		gw := config.Defaults()
		gw.Auth = config.NewAuth()
		gw.Auth.Server = config.NewAuthServer()
		gw.Auth.Server.Issuer = "https://gw.example.com"
		for _, u := range users {
			gw.Auth.Server.Users = append(gw.Auth.Server.Users, config.AuthUser{Name: u})
		}
		return gw
	}
	without := config.Defaults()
	for _, tc := range []struct {
		name string
		a, b config.Gateway
		want bool
	}{
		{"added", without, with(), true},
		{"dropped", with(), without, true},
		{"user added", with("me"), with("me", "you"), true},
		{"unchanged", with("me"), with("me"), false},
	} {
		if got := slices.Contains(restartKeys(tc.a, tc.b), "gateway.auth.server"); got != tc.want {
			t.Errorf("%s: restart keys %v, want gateway.auth.server: %v", tc.name, restartKeys(tc.a, tc.b), tc.want)
		}
	}
}

// TestOwnIssuerBeforeTheServer: the gate's entry for the authorization
// server, before the server is built (or without one), gives no key and
// revokes nothing: no token of it verifies.
func TestOwnIssuerBeforeTheServer(t *testing.T) {
	var own ownIssuer
	if keys := own.keys(); keys != nil {
		t.Fatalf("keys %v before the server", keys)
	}
	if own.revoked(map[string]any{"gid": "g"}) {
		t.Fatal("revoked before the server")
	}
	is := own.issuer(&config.AuthServer{Issuer: "https://gw.example.com"})
	if is.Issuer != "https://gw.example.com" || !slices.Equal(is.Algorithms, []string{"EdDSA"}) || is.Keys == nil || is.Revoked == nil {
		t.Fatalf("issuer entry %+v", is)
	}
}

// TestRevokedOutlivesTheGatesLeeway: the Store the gateway opens keeps a
// revoked grant as long as the gate may still accept one of its access
// tokens: their life and the leeway on exp.
func TestRevokedOutlivesTheGatesLeeway(t *testing.T) {
	sc := *config.NewAuthServer()
	sc.Issuer = "https://gw.example.com"
	clk := testkit.NewClock(time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC))
	store, err := authserver.OpenStore(t.Context(), storeSettings(sc), "", nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RevokeGrant(t.Context(), "g"); err != nil {
		t.Fatal(err)
	}
	// A token issued at the revocation expires after AccessTokenTTL,
	// and the gate takes it for ExpiryLeeway more.
	clk.Advance(sc.AccessTokenTTL + auth.ExpiryLeeway - time.Second)
	if !store.Revoked("g") {
		t.Fatal("the revocation was forgotten while a token of the grant may still be accepted")
	}
}
