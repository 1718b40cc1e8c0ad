package e2e

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// The attacks on the built-in authorization server (issue 21), each against a real gateway
// binary, each with a control: the same request done right succeeds, so a refusal is about the
// attack and not about a broken flow. Each test fails if the defence it names is removed.

// loopbackRedirect is the redirect URI of the local clients of these tests: loopback, so
// allowed on any port (RFC 8252 section 7.3), and never contacted (the code is read from the
// Location header).
const loopbackRedirect = "http://127.0.0.1:7777/callback"

// TestOAuthServerCodeReplay: an authorization code redeemed twice. The second redemption is
// refused (invalid_grant), and the tokens the first one issued stop working at once: the
// access token at the gateway, the refresh token at the token endpoint (RFC 9700 section
// 4.14.2: a replayed code means it leaked).
func TestOAuthServerCodeReplay(t *testing.T) {
	g := startAuthGateway(t, nil)
	c := publicClient(t, g.meta, loopbackRedirect)
	resource := g.resource("everything")

	verifier, challenge := newPKCE()
	code := c.codeOf(t, newUserAgent(t).authorize(t, c.authorizeURL(resource, challenge, nil), g.base, e2eUser, e2ePassword))
	first := c.redeem(t, code, verifier, resource)
	if first.status != http.StatusOK || first.AccessToken == "" || first.RefreshToken == "" {
		t.Fatalf("first redemption: %d: %s", first.status, first.body)
	}
	if s := bearerStatus(t, resource, first.AccessToken); s != http.StatusOK {
		t.Fatalf("the first redemption's access token: %d, want 200", s)
	}

	second := c.redeem(t, code, verifier, resource)
	if second.status != http.StatusBadRequest || second.Error != "invalid_grant" || second.AccessToken != "" {
		t.Errorf("second redemption of the code: %d: %s; want 400 invalid_grant", second.status, second.body)
	}
	if s := bearerStatus(t, resource, first.AccessToken); s != http.StatusUnauthorized {
		t.Errorf("the first redemption's access token after the replay: %d, want 401 (its grant revoked)", s)
	}
	if r := c.refresh(t, first.RefreshToken); r.status != http.StatusBadRequest || r.Error != "invalid_grant" {
		t.Errorf("the first redemption's refresh token after the replay: %d: %s; want 400 invalid_grant", r.status, r.body)
	}
}

// TestOAuthServerPKCEDowngrade: PKCE is required and S256 only. An authorization request
// without a challenge, or with method plain, goes back to the (valid) redirect URI with
// invalid_request and never reaches the sign-in page; a code redeemed with a wrong verifier or
// none is refused.
func TestOAuthServerPKCEDowngrade(t *testing.T) {
	g := startAuthGateway(t, nil)
	c := publicClient(t, g.meta, loopbackRedirect)
	resource := g.resource("everything")
	verifier, challenge := newPKCE()

	for _, tc := range []struct {
		name string
		set  map[string]string
	}{
		{"no challenge", map[string]string{"code_challenge": "", "code_challenge_method": ""}},
		{"challenge without method", map[string]string{"code_challenge_method": ""}},
		// A well-formed challenge under method plain: only the method is wrong.
		{"plain", map[string]string{"code_challenge_method": "plain"}},
		{"plain verifier as challenge", map[string]string{"code_challenge": verifier, "code_challenge_method": "plain"}},
		{"unknown method", map[string]string{"code_challenge_method": "S512"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newUserAgent(t).open(t, c.authorizeURL(resource, challenge, tc.set), g.base)
			if p.location == nil || !isRedirect(p.status) {
				t.Fatalf("%d, want a redirect to the client with an error: %s", p.status, brief(p.body))
			}
			q := p.location.Query()
			if got := origin(p.location) + p.location.Path; got != c.redirect || q.Get("error") != "invalid_request" || q.Has("code") || q.Get("state") != "e2e-state" {
				t.Errorf("redirect to %s, want %s?error=invalid_request&state=e2e-state and no code", p.location, c.redirect)
			}
		})
	}

	t.Run("wrong verifier", func(t *testing.T) {
		other, _ := newPKCE()
		for _, bad := range []string{other, ""} { // a fresh code each: a refused one may be spent
			_, ch := newPKCE()
			code := c.codeOf(t, newUserAgent(t).authorize(t, c.authorizeURL(resource, ch, nil), g.base, e2eUser, e2ePassword))
			if r := c.redeem(t, code, bad, resource); r.status != http.StatusBadRequest || r.AccessToken != "" {
				t.Errorf("code with verifier %q: %d: %s; want 400 and no token", bad, r.status, r.body)
			}
		}
	})

	t.Run("control", func(t *testing.T) {
		tok := c.grant(t, resource)
		if s := bearerStatus(t, resource, tok.AccessToken); s != http.StatusOK {
			t.Errorf("a token of the S256 flow: %d, want 200", s)
		}
	})
}

// TestOAuthServerRedirectURIs: the redirect URI policy. Registration refuses what the default
// policy (Claude's callbacks and loopback) does not name, look-alikes included; an
// authorization request whose redirect URI is not one of the client's gets a 400 page and
// redirects nowhere (no open redirect, not even with an error); loopback redirect URIs may
// change port (RFC 8252), others may not.
func TestOAuthServerRedirectURIs(t *testing.T) {
	g := startAuthGateway(t, nil)
	resource := g.resource("everything")

	t.Run("registration", func(t *testing.T) {
		for _, uri := range []string{
			"https://evil.example/api/mcp/auth_callback",
			"https://claude.ai.evil.example/api/mcp/auth_callback",
			"https://claude.ai@evil.example/api/mcp/auth_callback",
			"https://evil.example/?https://claude.ai/api/mcp/auth_callback",
			"https://evilclaude.ai/api/mcp/auth_callback",
			"https://claude.ai/api/mcp/auth_callback/../../../evil",
			"https://claude.ai/api/mcp/auth_callback?next=https://evil.example",
			"https://claude.ai/api/mcp/auth_callback#x",
			"http://claude.ai/api/mcp/auth_callback",
			"https://claude.ai:8443/api/mcp/auth_callback",
			"http://localhost.evil.example/callback",
			"http://127.0.0.1.evil.example/callback",
			"javascript:alert(1)",
		} {
			if status, body, _ := registerClient(t, g.meta, map[string]any{
				"client_name": "look-alike", "redirect_uris": []string{uri}, "token_endpoint_auth_method": "none",
			}); status != http.StatusBadRequest || !strings.Contains(body, "invalid_redirect_uri") {
				t.Errorf("registering %s: %d: %s; want 400 invalid_redirect_uri", uri, status, brief(body))
			}
		}
		for _, uri := range []string{"https://claude.ai/api/mcp/auth_callback", "https://claude.com/api/mcp/auth_callback", loopbackRedirect, "http://localhost:9/cb", "http://[::1]:9/cb"} {
			if status, body, _ := registerClient(t, g.meta, map[string]any{
				"client_name": "allowed", "redirect_uris": []string{uri}, "token_endpoint_auth_method": "none",
			}); status != http.StatusCreated {
				t.Errorf("registering %s: %d: %s; want 201", uri, status, brief(body))
			}
		}
	})

	claude := publicClient(t, g.meta, "https://claude.ai/api/mcp/auth_callback")
	local := publicClient(t, g.meta, loopbackRedirect)
	_, challenge := newPKCE()
	t.Run("not the client's", func(t *testing.T) {
		for _, tc := range []struct {
			c        oauthClient
			redirect string
		}{
			{claude, "https://evil.example/api/mcp/auth_callback"},
			{claude, "https://claude.ai.evil.example/api/mcp/auth_callback"},
			{claude, "https://claude.ai:8443/api/mcp/auth_callback"}, // port change, not loopback
			{claude, "https://claude.com/api/mcp/auth_callback"},     // allowed by policy, not registered
			{claude, "https://claude.ai/api/mcp/auth_callback/x"},
			{claude, loopbackRedirect},
			{local, "http://127.0.0.1:7777/other"},            // loopback: only the port may change
			{local, "http://localhost:7777/callback"},         // nor the host
			{local, "http://127.0.0.1.evil.example/callback"}, // look-alike
		} {
			p := newUserAgent(t).get(t, tc.c.authorizeURL(resource, challenge, map[string]string{"redirect_uri": tc.redirect}))
			if p.status != http.StatusBadRequest || p.location != nil {
				t.Errorf("client %s, redirect_uri %s: %d (Location %v), want a 400 page and no redirect", tc.c.redirect, tc.redirect, p.status, p.location)
			}
		}
		// An unknown client: nothing to trust its redirect URI with.
		unknown := oauthClient{meta: g.meta, id: "no-such-client", redirect: loopbackRedirect}
		if p := newUserAgent(t).get(t, unknown.authorizeURL(resource, challenge, nil)); p.status != http.StatusBadRequest || p.location != nil {
			t.Errorf("an unknown client: %d (Location %v), want a 400 page and no redirect", p.status, p.location)
		}
	})

	t.Run("loopback port change", func(t *testing.T) {
		moved := local
		moved.redirect = "http://127.0.0.1:45678/callback"
		verifier, challenge := newPKCE()
		to := newUserAgent(t).authorize(t, moved.authorizeURL(resource, challenge, nil), g.base, e2eUser, e2ePassword)
		if tok := moved.redeem(t, moved.codeOf(t, to), verifier, resource); tok.status != http.StatusOK {
			t.Errorf("a code sent to the loopback redirect URI on another port: %d: %s", tok.status, tok.body)
		}
	})

	t.Run("control", func(t *testing.T) {
		// Claude's registered callback works end to end (the code is read, not delivered).
		if tok := claude.grant(t, resource); bearerStatus(t, resource, tok.AccessToken) != http.StatusOK {
			t.Error("a token of the registered claude.ai callback is refused")
		}
	})
}

// TestOAuthServerResourceBinding: every protected resource's metadata names the gateway's own
// issuer, and a token is for one resource (RFC 8707). The gateway refuses
// it at its other servers; the authorization server refuses a resource it does not protect,
// and a token request naming another resource than the authorization did.
func TestOAuthServerResourceBinding(t *testing.T) {
	g := startAuthGateway(t, nil)
	c := publicClient(t, g.meta, loopbackRedirect)
	everything, other := g.resource("everything"), g.resource("other")
	// Each protected resource's metadata (RFC 9728) names the gateway's own issuer.
	for _, res := range []string{everything, other, g.base + "/mcp"} {
		checkResourceMetadata(t, res, g.base)
	}

	tok := c.grant(t, everything)
	if s := bearerStatus(t, everything, tok.AccessToken); s != http.StatusOK {
		t.Fatalf("the token at its own resource: %d, want 200", s)
	}
	if s := bearerStatus(t, other, tok.AccessToken); s != http.StatusUnauthorized {
		t.Errorf("the token of %s at %s: %d, want 401", everything, other, s)
	}
	// The endpoint merging every server is a resource of its own: its token opens no single
	// server, and a server's token does not open it.
	all := g.base + "/mcp"
	allTok := c.grant(t, all)
	if s := bearerStatus(t, all, allTok.AccessToken); s != http.StatusOK {
		t.Errorf("the token of %s there: %d, want 200", all, s)
	}
	if s := bearerStatus(t, everything, allTok.AccessToken); s != http.StatusUnauthorized {
		t.Errorf("the token of %s at %s: %d, want 401", all, everything, s)
	}
	if s := bearerStatus(t, all, tok.AccessToken); s != http.StatusUnauthorized {
		t.Errorf("the token of %s at %s: %d, want 401", everything, all, s)
	}
	// A refresh may not move the grant to another resource either.
	if r := c.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "resource": {other}}); r.status == http.StatusOK {
		t.Errorf("refresh for another resource: 200 (%s), want an error", r.body)
	}

	_, challenge := newPKCE()
	for _, res := range []string{"https://evil.example/mcp", g.base + "/servers/nope/mcp", g.base + "/servers/everything/mcp/../../other/mcp"} {
		p := newUserAgent(t).open(t, c.authorizeURL(res, challenge, nil), g.base)
		if p.location == nil || p.location.Query().Get("error") != "invalid_target" || p.location.Query().Has("code") {
			t.Errorf("authorization for resource %s: %d (Location %v), want a redirect with error=invalid_target", res, p.status, p.location)
		}
	}

	verifier, challenge := newPKCE()
	code := c.codeOf(t, newUserAgent(t).authorize(t, c.authorizeURL(everything, challenge, nil), g.base, e2eUser, e2ePassword))
	if r := c.redeem(t, code, verifier, other); r.status == http.StatusOK {
		t.Errorf("a code of %s redeemed for %s: 200, want an error: %s", everything, other, r.body)
	}
}

// TestOAuthServerRefreshReuse: refresh tokens rotate, and presenting a replaced one again
// revokes the grant (RFC 9700 section 4.14.2): the current refresh token and the grant's
// access tokens stop working.
func TestOAuthServerRefreshReuse(t *testing.T) {
	g := startAuthGateway(t, nil)
	c := publicClient(t, g.meta, loopbackRedirect)
	resource := g.resource("everything")

	tok := c.grant(t, resource)
	next := c.refresh(t, tok.RefreshToken)
	if next.status != http.StatusOK || next.RefreshToken == "" || next.RefreshToken == tok.RefreshToken || next.AccessToken == "" {
		t.Fatalf("refresh: %d: %s; want a new refresh token", next.status, next.body)
	}
	if s := bearerStatus(t, resource, next.AccessToken); s != http.StatusOK {
		t.Fatalf("the refreshed access token: %d, want 200", s)
	}

	reuse := c.refresh(t, tok.RefreshToken)
	if reuse.status != http.StatusBadRequest || reuse.Error != "invalid_grant" {
		t.Errorf("the replaced refresh token again: %d: %s; want 400 invalid_grant", reuse.status, reuse.body)
	}
	if r := c.refresh(t, next.RefreshToken); r.status != http.StatusBadRequest || r.Error != "invalid_grant" {
		t.Errorf("the current refresh token after the reuse: %d: %s; want 400 invalid_grant (grant revoked)", r.status, r.body)
	}
	for name, at := range map[string]string{"first": tok.AccessToken, "refreshed": next.AccessToken} {
		if s := bearerStatus(t, resource, at); s != http.StatusUnauthorized {
			t.Errorf("the %s access token after the reuse: %d, want 401", name, s)
		}
	}
}

// TestOAuthServerRevocation: RFC 7009. Revoking a grant's refresh token, or its access token,
// ends the grant: its access tokens are refused by the gateway at once (not at their expiry)
// and its refresh token is refused. Unknown tokens get 200 too.
func TestOAuthServerRevocation(t *testing.T) {
	g := startAuthGateway(t, nil)
	c := publicClient(t, g.meta, loopbackRedirect)
	resource := g.resource("everything")

	for _, which := range []string{"refresh_token", "access_token"} {
		t.Run(which, func(t *testing.T) {
			tok := c.grant(t, resource)
			if s := bearerStatus(t, resource, tok.AccessToken); s != http.StatusOK {
				t.Fatalf("before revocation: %d, want 200", s)
			}
			value := tok.RefreshToken
			if which == "access_token" {
				value = tok.AccessToken
			}
			if s := revoke(t, c, value, which); s != http.StatusOK {
				t.Fatalf("revocation: %d, want 200", s)
			}
			if s := bearerStatus(t, resource, tok.AccessToken); s != http.StatusUnauthorized {
				t.Errorf("the access token right after revocation: %d, want 401", s)
			}
			if r := c.refresh(t, tok.RefreshToken); r.status != http.StatusBadRequest || r.Error != "invalid_grant" {
				t.Errorf("the refresh token after revocation: %d: %s; want 400 invalid_grant", r.status, r.body)
			}
		})
	}
	if s := revoke(t, c, "no-such-token", ""); s != http.StatusOK {
		t.Errorf("revoking an unknown token: %d, want 200", s)
	}
}

// revoke posts token to the revocation endpoint as client c, with hint ("" for none).
func revoke(t *testing.T, c oauthClient, token, hint string) int {
	t.Helper()
	form := url.Values{"token": {token}, "client_id": {c.id}}
	if hint != "" {
		form.Set("token_type_hint", hint)
	}
	resp, err := http.PostForm(c.meta.RevocationEndpoint, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOAuthServerDocumentFence: a client ID metadata document is fetched from the URL an
// anonymous caller of /oauth/authorize names, so the gateway must never fetch one from a
// private or loopback address (SSRF). A listener on loopback stands where the document would
// be: the authorization is refused with a 400 page, and nothing ever connects to it.
func TestOAuthServerDocumentFence(t *testing.T) {
	g := startAuthGateway(t, nil)
	if !g.meta.CIMD {
		t.Fatal("the metadata does not say client_id_metadata_document_supported (on by default)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	_, challenge := newPKCE()
	for _, id := range []string{
		"https://127.0.0.1:" + port + "/client.json",
		"https://localhost:" + port + "/client.json",
		"https://[::ffff:127.0.0.1]:" + port + "/client.json",
	} {
		c := oauthClient{meta: g.meta, id: id, redirect: loopbackRedirect}
		p := newUserAgent(t).get(t, c.authorizeURL(g.resource("everything"), challenge, nil))
		if p.status != http.StatusBadRequest || p.location != nil {
			t.Errorf("client id %s: %d (Location %v), want a 400 page", id, p.status, p.location)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the gateway connected %d times to the loopback address a client id named", n)
	}
}
