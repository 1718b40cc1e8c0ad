package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The harness of the built-in authorization server's tests (issue 21, gateway.auth.server): a
// gateway whose own authorization server protects its servers, a user agent that walks its
// sign-in and consent pages over plain HTTP by the form contract those pages keep (the login
// form posts username, password and csrf to /oauth/login?request=ID; the consent form posts
// decision=allow|deny and csrf to /oauth/consent?request=ID), and a minimal OAuth client
// (registration, PKCE, token requests) for what the SDK would never send: the attacks.

// e2eUser and e2ePassword are the one user the gateways of these tests know.
const (
	e2eUser     = "alice"
	e2ePassword = "correct horse battery staple"
)

// authGateway is a running gateway with gateway.auth.server on.
type authGateway struct {
	base string // http://127.0.0.1:PORT: the gateway, its public URL and the issuer
	meta asMetadata
}

// resource returns the canonical URL of server name: the resource a token for it names.
func (g *authGateway) resource(name string) string { return g.base + "/servers/" + name + "/mcp" }

// asMetadata is what the tests read of the RFC 8414 metadata.
type asMetadata struct {
	Issuer                   string   `json:"issuer"`
	AuthorizationEndpoint    string   `json:"authorization_endpoint"`
	TokenEndpoint            string   `json:"token_endpoint"`
	RegistrationEndpoint     string   `json:"registration_endpoint"`
	RevocationEndpoint       string   `json:"revocation_endpoint"`
	JWKSURI                  string   `json:"jwks_uri"`
	ResponseTypes            []string `json:"response_types_supported"`
	GrantTypes               []string `json:"grant_types_supported"`
	CodeChallengeMethods     []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	ScopesSupported          []string `json:"scopes_supported"`
	CIMD                     bool     `json:"client_id_metadata_document_supported"`
}

// passwordHash asks the gateway binary for the hash of password (`mcpgate passwd`, the password
// as one line of standard input), as a person setting up a gateway does.
func passwordHash(t *testing.T, password string) string {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), "passwd")
	cmd.Stdin = strings.NewReader(password + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcpgate passwd: %v: %s%s", err, out, stderr.String())
	}
	hash := strings.TrimSpace(string(out))
	if !strings.HasPrefix(hash, "$argon2id$") && !strings.HasPrefix(hash, "$2") {
		t.Fatalf("mcpgate passwd printed %q, want an argon2id or bcrypt hash", hash)
	}
	return hash
}

// startAuthGateway starts a gateway on a free loopback port serving the Go conformance server
// as "everything" and a second copy as "other", both protected by the gateway's own
// authorization server, whose issuer is the gateway's URL and whose one user is e2eUser.
// server holds more keys of gateway.auth.server (accessTokenTtl, redirectUris, ...).
func startAuthGateway(t *testing.T, server map[string]any) *authGateway {
	t.Helper()
	requirePeers(t, everythingServer)
	addr := testkit.FreeAddr(t)
	path := writeGatewayConfig(t, authGatewayConfig(t, "http://"+addr, server))
	if got := startGatewayFile(t, path, addr); got != "http://"+addr {
		t.Fatalf("gateway at %s, want http://%s", got, addr)
	}
	return &authGateway{base: "http://" + addr, meta: fetchASMetadata(t, "http://"+addr)}
}

// authGatewayConfig is startAuthGateway's config for a gateway at base.
func authGatewayConfig(t *testing.T, base string, server map[string]any) gatewayConfig {
	t.Helper()
	as := map[string]any{
		"users":     []any{map[string]any{"name": e2eUser, "passwordHash": passwordHash(t, e2ePassword)}},
		"stateFile": filepath.Join(t.TempDir(), "mcpgate-auth.json"),
	}
	for k, v := range server {
		as[k] = v
	}
	return gatewayConfig{
		MCPServers: map[string]serverConfig{
			"everything": {Command: everythingServer},
			"other":      {Command: everythingServer},
		},
		Gateway: map[string]any{"auth": map[string]any{"publicUrl": base, "server": as}},
	}
}

// fetchASMetadata reads the RFC 8414 metadata at the issuer base and checks what every client
// of these tests relies on.
func fetchASMetadata(t *testing.T, base string) asMetadata {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var md asMetadata
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &md) != nil {
		t.Fatalf("authorization server metadata: %d: %s", resp.StatusCode, body)
	}
	if md.Issuer != base || md.AuthorizationEndpoint == "" || md.TokenEndpoint == "" || md.RegistrationEndpoint == "" ||
		md.RevocationEndpoint == "" || strings.Join(md.CodeChallengeMethods, ",") != "S256" {
		t.Fatalf("authorization server metadata: %s; want issuer %s, every endpoint, and S256 only", body, base)
	}
	return md
}

// userAgent is a browser without JavaScript: cookies, no automatic redirects (each is
// followed by hand, so the tests see every hop), and an Origin header on form posts as browsers
// send it.
type userAgent struct {
	c *http.Client
}

func newUserAgent(t *testing.T) *userAgent {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &userAgent{c: &http.Client{
		Jar:           jar,
		Timeout:       20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// page is one response the user agent got.
type page struct {
	url      *url.URL // where it was fetched from
	status   int
	header   http.Header
	location *url.URL // the redirect target, resolved; nil if none
	body     string
}

func (ua *userAgent) do(t *testing.T, req *http.Request) page {
	t.Helper()
	resp, err := ua.c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	p := page{url: req.URL, status: resp.StatusCode, header: resp.Header, body: string(data)}
	if loc := resp.Header.Get("Location"); loc != "" {
		if u, err := req.URL.Parse(loc); err == nil {
			p.location = u
		}
	}
	return p
}

func (ua *userAgent) get(t *testing.T, u string) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ua.do(t, req)
}

// post submits a form to action with origin as its Origin header ("" sends none).
func (ua *userAgent) post(t *testing.T, action string, form url.Values, origin string) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, action, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return ua.do(t, req)
}

// open GETs u and follows redirects that stay on issuer's origin until a page, which it
// returns, or a redirect away from the issuer (to the client), which it returns unfollowed.
func (ua *userAgent) open(t *testing.T, u, issuer string) page {
	t.Helper()
	p := ua.get(t, u)
	for hops := 0; p.location != nil && isRedirect(p.status); hops++ {
		if hops == 10 {
			t.Fatalf("more than 10 redirects from %s", u)
		}
		if origin(p.location) != issuer {
			return p
		}
		p = ua.get(t, p.location.String())
	}
	return p
}

func isRedirect(status int) bool { return status >= 300 && status < 400 }

// origin is the scheme://host[:port] of u.
func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// htmlForm is a form found on a page: where it posts and its hidden csrf field.
type htmlForm struct {
	action string // resolved against the page's URL
	csrf   string
}

// form finds the form of p that posts to a path ending in pathSuffix (e.g. "/oauth/login").
func (p page) form(t *testing.T, pathSuffix string) htmlForm {
	t.Helper()
	action, csrf, ok := scrapeForm(p.body, pathSuffix)
	if !ok {
		t.Fatalf("%s (%d): no form posting to %s with a csrf field:\n%s", p.url, p.status, pathSuffix, brief(p.body))
	}
	u, err := p.url.Parse(action)
	if err != nil {
		t.Fatalf("%s: form action %q: %v", p.url, action, err)
	}
	return htmlForm{action: u.String(), csrf: csrf}
}

// signIn posts the user's credentials to the sign-in page p and returns the answer.
func (ua *userAgent) signIn(t *testing.T, p page, user, password, issuer string) page {
	t.Helper()
	f := p.form(t, "/oauth/login")
	return ua.post(t, f.action, url.Values{"csrf": {f.csrf}, "username": {user}, "password": {password}}, issuer)
}

// authorize walks the whole authorization of authorizeURL as a person would: the sign-in page
// (user, password), the consent page (allow), and returns where the server finally sends the
// browser: the client's redirect URI with the code, not followed.
func (ua *userAgent) authorize(t *testing.T, authorizeURL, issuer, user, password string) *url.URL {
	t.Helper()
	login := ua.open(t, authorizeURL, issuer)
	if login.status != http.StatusOK {
		t.Fatalf("authorization request %s: %d (Location %v), want the sign-in page: %s", authorizeURL, login.status, login.location, brief(login.body))
	}
	signedIn := ua.signIn(t, login, user, password, issuer)
	if signedIn.status != http.StatusSeeOther || signedIn.location == nil {
		t.Fatalf("sign-in: %d, want 303 to the consent page: %s", signedIn.status, brief(signedIn.body))
	}
	consent := ua.open(t, signedIn.location.String(), issuer)
	if consent.status != http.StatusOK {
		t.Fatalf("consent page: %d (Location %v): %s", consent.status, consent.location, brief(consent.body))
	}
	return ua.decide(t, consent, "allow", issuer)
}

// decide posts decision on the consent page p and returns the redirect to the client.
func (ua *userAgent) decide(t *testing.T, p page, decision, issuer string) *url.URL {
	t.Helper()
	f := p.form(t, "/oauth/consent")
	r := ua.post(t, f.action, url.Values{"csrf": {f.csrf}, "decision": {decision}}, issuer)
	if r.status != http.StatusSeeOther || r.location == nil {
		t.Fatalf("consent %s: %d, want 303 to the client: %s", decision, r.status, brief(r.body))
	}
	return r.location
}

// oauthClient is a client registered with the gateway's authorization server.
type oauthClient struct {
	meta     asMetadata
	id       string
	secret   string // "" for a public client
	redirect string // its first redirect URI
}

// registerClient registers a client by RFC 7591 and returns the answer's status and body, and
// the client when it was created.
func registerClient(t *testing.T, meta asMetadata, metadata map[string]any) (int, string, oauthClient) {
	t.Helper()
	body, _ := json.Marshal(metadata)
	resp, err := http.Post(meta.RegistrationEndpoint, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var reg struct {
		ClientID     string   `json:"client_id"`
		ClientSecret string   `json:"client_secret"`
		RedirectURIs []string `json:"redirect_uris"`
	}
	c := oauthClient{meta: meta}
	if resp.StatusCode == http.StatusCreated && json.Unmarshal(data, &reg) == nil && len(reg.RedirectURIs) > 0 {
		c.id, c.secret, c.redirect = reg.ClientID, reg.ClientSecret, reg.RedirectURIs[0]
	}
	return resp.StatusCode, string(data), c
}

// publicClient registers a public client (PKCE only) with redirect URIs uris.
func publicClient(t *testing.T, meta asMetadata, uris ...string) oauthClient {
	t.Helper()
	status, body, c := registerClient(t, meta, map[string]any{
		"client_name": "mcpgate-e2e-attacker-or-not", "redirect_uris": uris,
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	if status != http.StatusCreated || c.id == "" {
		t.Fatalf("registration of %v: %d: %s", uris, status, body)
	}
	return c
}

// newPKCE returns a fresh code verifier and its S256 challenge.
func newPKCE() (verifier, challenge string) {
	verifier = base64.RawURLEncoding.EncodeToString([]byte(rand.Text() + rand.Text()))
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeURL is c's authorization request for resource with PKCE challenge (S256), state
// "e2e-state", and its first redirect URI; set overrides or adds parameters ("" deletes one).
func (c oauthClient) authorizeURL(resource, challenge string, set map[string]string) string {
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirect},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"},
		"resource": {resource}, "state": {"e2e-state"},
	}
	for k, v := range set {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	return c.meta.AuthorizationEndpoint + "?" + q.Encode()
}

// tokenResponse is a token endpoint's answer, success or error.
type tokenResponse struct {
	status       int
	body         string
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
}

// token posts form to the token endpoint, with c's client_id (and secret, posted).
func (c oauthClient) token(t *testing.T, form url.Values) tokenResponse {
	t.Helper()
	form.Set("client_id", c.id)
	if c.secret != "" {
		form.Set("client_secret", c.secret)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.meta.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	tr := tokenResponse{status: resp.StatusCode, body: string(data)}
	_ = json.Unmarshal(data, &tr)
	return tr
}

// redeem exchanges code (from redirect u) for tokens, with verifier, for resource ("" sends
// none).
func (c oauthClient) redeem(t *testing.T, code, verifier, resource string) tokenResponse {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.redirect}}
	if verifier != "" {
		form.Set("code_verifier", verifier)
	}
	if resource != "" {
		form.Set("resource", resource)
	}
	return c.token(t, form)
}

// refresh redeems refresh token rt.
func (c oauthClient) refresh(t *testing.T, rt string) tokenResponse {
	t.Helper()
	return c.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
}

// codeOf returns the code of a redirect to the client, failing unless it is one to c's
// redirect URI with state "e2e-state" and the issuer (RFC 9207).
func (c oauthClient) codeOf(t *testing.T, u *url.URL) string {
	t.Helper()
	q := u.Query()
	if got := u.Scheme + "://" + u.Host + u.Path; got != c.redirect || q.Get("code") == "" || q.Get("state") != "e2e-state" || q.Get("iss") != c.meta.Issuer {
		t.Fatalf("redirect %s: want %s with a code, state e2e-state and iss %s", u, c.redirect, c.meta.Issuer)
	}
	return q.Get("code")
}

// grant runs the whole flow for c and resource as e2eUser and returns the tokens.
func (c oauthClient) grant(t *testing.T, resource string) tokenResponse {
	t.Helper()
	verifier, challenge := newPKCE()
	to := newUserAgent(t).authorize(t, c.authorizeURL(resource, challenge, nil), c.meta.Issuer, e2eUser, e2ePassword)
	tok := c.redeem(t, c.codeOf(t, to), verifier, resource)
	if tok.status != http.StatusOK || tok.AccessToken == "" || tok.RefreshToken == "" {
		t.Fatalf("token request: %d: %s", tok.status, tok.body)
	}
	return tok
}

// bearerStatus is the status of an initialize at resource with access token tok.
func bearerStatus(t *testing.T, resource, tok string) int {
	t.Helper()
	return mcpDo(t, http.MethodPost, resource, "Bearer "+tok, "", initializeRequest(1)).status
}
