package authserver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// TestMetadata: the RFC 8414 document lists what the design asks, at
// both well-known URLs, open to every origin.
func TestMetadata(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		rec := w.get(path)
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		if rec.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: not open to every origin", path)
		}
		want := map[string]any{
			"issuer":                                issuer,
			"authorization_endpoint":                issuer + "/oauth/authorize",
			"token_endpoint":                        issuer + "/oauth/token",
			"registration_endpoint":                 issuer + "/oauth/register",
			"revocation_endpoint":                   issuer + "/oauth/revoke",
			"jwks_uri":                              issuer + "/oauth/jwks",
			"client_id_metadata_document_supported": true,
			"authorization_response_iss_parameter_supported": true,
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s: %s = %v, want %v", path, k, m[k], v)
			}
		}
		lists := map[string][]string{
			"response_types_supported":              {"code"},
			"grant_types_supported":                 {"authorization_code", "refresh_token"},
			"code_challenge_methods_supported":      {"S256"},
			"token_endpoint_auth_methods_supported": {"none", "client_secret_post", "client_secret_basic"},
			"scopes_supported":                      {"mcp", "files"},
		}
		for k, v := range lists {
			var got []string
			for _, e := range m[k].([]any) {
				got = append(got, e.(string))
			}
			if !slices.Equal(got, v) {
				t.Errorf("%s: %s = %v, want %v", path, k, got, v)
			}
		}
	}
	// Registration and client ID metadata documents off: not advertised.
	cfg := testConfig()
	cfg.Registration, cfg.ClientMetadataDocuments = false, false
	s, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.provider.metadata()
	if m.RegistrationEndpoint != "" || m.ClientIDMetadataDocumentSupported {
		t.Errorf("registration off: %+v", m)
	}
}

// TestMetadataIssuerPath: an issuer with a path serves its metadata at
// the path-inserted URL too (RFC 8414 3.1), and its endpoints under it.
func TestMetadataIssuerPath(t *testing.T) {
	cfg := testConfig()
	cfg.Issuer = "https://example.com/mcpgate"
	s, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, s: s}
	for _, path := range []string{"/.well-known/oauth-authorization-server/mcpgate", "/mcpgate/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
		rec := w.get(path)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"token_endpoint":"https://example.com/mcpgate/oauth/token"`) {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
}

// TestAuthorizeRefusals: what /authorize refuses, and how: a page of
// its own while the client or its redirect URI is unknown (no open
// redirect), else an error sent to the client's redirect URI.
func TestAuthorizeRefusals(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	for _, tc := range []struct {
		name   string
		change func(url.Values)
		page   bool   // a 400 page of ours
		error  string // else the error code at the redirect URI
	}{
		{"unknown client", func(q url.Values) { q.Set("client_id", "nobody") }, true, ""},
		{"unregistered redirect", func(q url.Values) { q.Set("redirect_uri", "https://evil.example.com/cb") }, true, ""},
		{"look-alike redirect", func(q url.Values) { q.Set("redirect_uri", "https://app.example.com.evil.example/cb") }, true, ""},
		{"redirect path changed", func(q url.Values) { q.Set("redirect_uri", appRedir+"/../x") }, true, ""},
		{"loopback other path", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:4000/other") }, true, ""},
		{"loopback other host", func(q url.Values) { q.Set("redirect_uri", "http://localhost:3000/callback") }, true, ""},
		{"repeated parameter", func(q url.Values) { q.Add("redirect_uri", appRedir) }, true, ""},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, false, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain"); q.Set("code_challenge", verifier) }, false, "invalid_request"},
		{"PKCE without method", func(q url.Values) { q.Del("code_challenge_method") }, false, "invalid_request"},
		{"bad challenge", func(q url.Values) { q.Set("code_challenge", "short") }, false, "invalid_request"},
		{"token response", func(q url.Values) { q.Set("response_type", "token") }, false, "unsupported_response_type"},
		{"no resource of two", func(q url.Values) { q.Del("resource") }, false, "invalid_target"},
		{"unknown resource", func(q url.Values) { q.Set("resource", "https://gw.example.com/servers/other/mcp") }, false, "invalid_target"},
		{"two resources", func(q url.Values) { q.Add("resource", filesURL) }, false, "invalid_target"},
		{"unknown scope", func(q url.Values) { q.Set("scope", "mcp admin") }, false, "invalid_scope"},
		{"request object", func(q url.Values) { q.Set("request_uri", "urn:x") }, false, "request_not_supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := authorizeParams()
			tc.change(q)
			rec := w.authorize(q)
			if tc.page {
				if rec.Code != http.StatusBadRequest || rec.Header().Get("Location") != "" || !strings.Contains(rec.Body.String(), "Sign-in refused") {
					t.Fatalf("%d to %q, want a 400 page", rec.Code, rec.Header().Get("Location"))
				}
				return
			}
			loc, err := url.Parse(rec.Header().Get("Location"))
			if rec.Code != http.StatusSeeOther || err != nil || !strings.HasPrefix(loc.String(), appRedir+"?") {
				t.Fatalf("%d to %q, want a 303 to the client", rec.Code, rec.Header().Get("Location"))
			}
			if got := loc.Query(); got.Get("error") != tc.error || got.Get("state") != "st4te" || got.Get("iss") != issuer || got.Get("code") != "" {
				t.Fatalf("redirect %s, want error %s with state and iss", loc, tc.error)
			}
		})
	}
}

// TestAuthorizeAccepts: scopes narrowed or all, the only resource when
// one is protected, a resource spelt with a trailing '/' or upper-case
// host, a loopback redirect URI on another port, the client's only
// redirect URI when none is sent.
func TestAuthorizeAccepts(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	for _, tc := range []struct {
		name     string
		change   func(url.Values)
		scopes   []string
		resource string
		redirect string
	}{
		{"empty scope is all", func(q url.Values) {}, []string{"mcp", "files"}, memoryURL, appRedir},
		{"narrowed scope", func(q url.Values) { q.Set("scope", "files files") }, []string{"files"}, memoryURL, appRedir},
		{"resource spelling", func(q url.Values) { q.Set("resource", "https://GW.example.com/servers/files/mcp/") }, []string{"mcp", "files"}, filesURL, appRedir},
		{"loopback any port", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:51234/callback") }, []string{"mcp", "files"}, memoryURL, "http://127.0.0.1:51234/callback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := authorizeParams()
			tc.change(q)
			req := w.stored(w.authorize(q))
			if !slices.Equal(req.Scopes, tc.scopes) || req.Resource != tc.resource || req.RedirectURI != tc.redirect ||
				req.CodeChallengeMethod != "S256" || req.State != "st4te" || len(req.CSRF) != 43 || req.User != "" {
				t.Fatalf("stored %+v", req)
			}
		})
	}
	// One protected target: the resource may be left out.
	cfg := testConfig()
	s, err := New(cfg, Deps{Store: w.store, Now: w.clk.Now, Resources: func() []string { return []string{memoryURL} }})
	if err != nil {
		t.Fatal(err)
	}
	one := &world{t: t, s: s, clk: w.clk, store: w.store}
	q := authorizeParams()
	q.Del("resource")
	if req := one.stored(one.authorize(q)); req.Resource != memoryURL {
		t.Fatalf("resource %q, want the only one", req.Resource)
	}
	// Its legacy /sse URL (listed by the gateway for SSE clients) is
	// another name of the same target, not a second one; asked for, it
	// is the token's resource.
	sseURL := strings.TrimSuffix(memoryURL, "/mcp") + "/sse"
	s, err = New(cfg, Deps{Store: w.store, Now: w.clk.Now, Resources: func() []string { return []string{memoryURL, sseURL} }})
	if err != nil {
		t.Fatal(err)
	}
	one = &world{t: t, s: s, clk: w.clk, store: w.store}
	if req := one.stored(one.authorize(q)); req.Resource != memoryURL {
		t.Fatalf("resource %q with the /sse URL listed, want the only target's", req.Resource)
	}
	q = authorizeParams()
	q.Set("resource", sseURL)
	if req := one.stored(one.authorize(q)); req.Resource != sseURL {
		t.Fatalf("resource %q, want the /sse URL asked for", req.Resource)
	}
	// The confidential client has one redirect URI: it may be left out.
	q = authorizeParams()
	q.Set("client_id", confID)
	q.Del("redirect_uri")
	if req := w.stored(w.authorize(q)); req.RedirectURI != appRedir {
		t.Fatalf("redirect %q, want the client's only one", req.RedirectURI)
	}
}

// TestRefuse: a denied request goes back to the client with
// access_denied and is forgotten; finish refuses a request nobody
// consented to.
func TestRefuse(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	req := w.stored(w.authorize(authorizeParams()))
	rec := newRecorder()
	w.s.provider.refuse(rec, newRequest(), req, "access_denied", "the user said no")
	loc, _ := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusSeeOther || loc.Query().Get("error") != "access_denied" || loc.Query().Get("state") != "st4te" {
		t.Fatalf("refuse: %d to %s", rec.Code, loc)
	}
	if _, err := w.store.AuthRequest(t.Context(), req.ID); err == nil {
		t.Error("a refused request is still stored")
	}
	req = w.stored(w.authorize(authorizeParams()))
	rec = newRecorder()
	w.s.provider.finish(rec, newRequest(), req) // nobody signed in
	loc, _ = url.Parse(rec.Header().Get("Location"))
	if loc.Query().Get("error") != "access_denied" || loc.Query().Get("code") != "" {
		t.Fatalf("finish without consent: %s", loc)
	}
}

// TestAuthorizeFollowsThePolicy: a client registered while the policy
// allowed its redirect URI is refused at /authorize once the operator
// narrowed gateway.auth.server.redirectUris, on the client's own page
// (a 400, never a redirect to a URI no longer trusted).
func TestAuthorizeFollowsThePolicy(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	cfg := testConfig()
	cfg.RedirectURIs = config.DefaultRedirectURIs // appRedir no longer allowed
	s, err := New(cfg, Deps{Store: w.store, Now: w.clk.Now, Resources: func() []string { return []string{memoryURL, filesURL} }})
	if err != nil {
		t.Fatal(err)
	}
	narrowed := &world{t: t, s: s, clk: w.clk, store: w.store}
	rec := narrowed.authorize(authorizeParams())
	if rec.Code != http.StatusBadRequest || rec.Header().Get("Location") != "" {
		t.Fatalf("authorize after the policy narrowed: %d to %q, want a 400 page", rec.Code, rec.Header().Get("Location"))
	}
	// The loopback callback of the same client still passes on any port.
	q := authorizeParams()
	q.Set("redirect_uri", "http://127.0.0.1:54321/callback")
	if req := narrowed.stored(narrowed.authorize(q)); req.RedirectURI != "http://127.0.0.1:54321/callback" {
		t.Fatalf("loopback redirect %q", req.RedirectURI)
	}
}
