package authserver

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The protocol part of the server: metadata (metadata.go), /authorize
// (here), /token (token.go), /revoke (revoke.go) and the signing keys
// (keys.go, tokens.go).
//
// It is built from zitadel/oidc's pieces (its PKCE check, claims and
// discovery document; go-jose signs) rather than its op.Provider,
// whose Storage would have to be a second copy of our Store's contract
// and which cannot do what the MCP authorization spec asks of this
// server: a request without the "openid" scope and with none at all
// (then every scope of the config), the resource parameter (RFC 8707)
// required and binding the code, the grant and each token to one target,
// S256 PKCE only (op also takes plain), EdDSA keys derived from our key
// ring, and reuse of a code or refresh token revoking its grant.

const (
	// requestTTL is how long a user has to sign in and consent.
	requestTTL = 10 * time.Minute
	// codeTTL is an authorization code's life: the client redeems it at
	// once (RFC 6749 4.1.2 recommends at most 10 minutes).
	codeTTL = 2 * time.Minute
	// maxProtocolForm bounds a request's form: every field is short.
	maxProtocolForm = 64 << 10
)

type provider struct {
	s    *Server
	keys *keyRing
}

func newProvider(s *Server) (*provider, error) {
	keys, err := newKeyRing(context.Background(), s.deps.Ring, s.store)
	if err != nil {
		return nil, err
	}
	return &provider{s: s, keys: keys}, nil
}

func (p *provider) routes(mux *http.ServeMux) {
	meta := cors(http.HandlerFunc(p.serveMetadata))
	mux.Handle("GET /.well-known/oauth-authorization-server", meta)
	mux.Handle("GET /.well-known/openid-configuration", meta)
	if path := p.issuerPath(); path != "" {
		// RFC 8414 section 3.1: the issuer's path goes after the
		// well-known one; OpenID discovery puts it before.
		mux.Handle("GET /.well-known/oauth-authorization-server"+path, meta)
		mux.Handle("GET "+path+"/.well-known/openid-configuration", meta)
	}
	mux.HandleFunc("GET /oauth/authorize", p.authorize)
	mux.HandleFunc("POST /oauth/authorize", p.authorize) // RFC 6749 3.1 allows POST
	mux.Handle("/oauth/token", cors(postOnly(p.token)))
	mux.Handle("/oauth/revoke", cors(postOnly(p.revoke)))
	mux.Handle("GET /oauth/jwks", cors(http.HandlerFunc(p.serveJWKS)))
}

// issuerPath is the issuer's path ("" for none), without a trailing '/'.
func (p *provider) issuerPath() string {
	u, err := url.Parse(p.s.cfg.Issuer)
	if err != nil {
		return ""
	}
	return strings.TrimRight(u.EscapedPath(), "/")
}

// url is the public URL of the server's path.
func (p *provider) url(path string) string {
	return strings.TrimRight(p.s.cfg.Issuer, "/") + path
}

// authorize validates an authorization request (RFC 6749 4.1.1, with
// PKCE and resource), stores it and hands the user agent to the login
// pages. Until the client and its redirect URI are known good, errors
// are a page of ours (an error sent to an unchecked redirect URI is an
// open redirect); after, they go to the client.
func (p *provider) authorize(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	r.Body = http.MaxBytesReader(w, r.Body, maxProtocolForm)
	if err := r.ParseForm(); err != nil {
		authorizePage(w, http.StatusBadRequest, "The request could not be read.")
		return
	}
	q := r.Form
	for _, k := range []string{"client_id", "redirect_uri", "response_type", "state", "scope", "code_challenge", "code_challenge_method"} {
		if len(q[k]) > 1 {
			authorizePage(w, http.StatusBadRequest, "The request repeats "+k+".")
			return
		}
	}
	client, err := p.s.clients.client(r.Context(), q.Get("client_id"))
	if errors.Is(err, ErrUnavailable) {
		p.s.deps.Logger.Error("authorize: looking up the client", "client_id", q.Get("client_id"), "err", err)
		w.Header().Set("Retry-After", retryAfterSeconds)
		authorizePage(w, http.StatusServiceUnavailable, "Sign-in is unavailable for a moment. Try again shortly.")
		return
	}
	if err != nil {
		p.s.deps.Logger.Info("authorize refused: unknown client", "client_id", q.Get("client_id"), "err", err)
		authorizePage(w, http.StatusBadRequest, "The application asking to sign in is not registered here.")
		return
	}
	redirect, ok := p.redirectURI(client, q.Get("redirect_uri"))
	if !ok {
		p.s.deps.Logger.Info("authorize refused: redirect URI not registered", "client_id", client.ID, "redirect_uri", q.Get("redirect_uri"))
		authorizePage(w, http.StatusBadRequest, "The application gave a return address it did not register.")
		return
	}
	req := &AuthRequest{
		ID: newSecret(), ClientID: client.ID, RedirectURI: redirect, State: q.Get("state"), Nonce: q.Get("nonce"),
		ResponseType: q.Get("response_type"), ResponseMode: q.Get("response_mode"),
		CodeChallenge: q.Get("code_challenge"), CodeChallengeMethod: q.Get("code_challenge_method"),
		CreatedAt: p.s.deps.Now(), CSRF: newSecret(),
	}
	fail := func(code, description string) { p.redirectError(w, r, req, code, description) }
	switch {
	case req.ResponseType != "code":
		fail("unsupported_response_type", "response_type must be code")
		return
	case req.ResponseMode != "" && req.ResponseMode != "query":
		fail(errInvalidRequest, "response_mode must be query")
		return
	case q.Has("request") || q.Has("request_uri"):
		fail("request_not_supported", "request objects are not supported")
		return
	case req.CodeChallenge == "":
		fail(errInvalidRequest, "PKCE is required: send code_challenge with code_challenge_method S256")
		return
	case req.CodeChallengeMethod != "S256":
		// An absent method means plain (RFC 7636 4.3): refused as plain
		// is, since it lets whoever sees the request redeem the code.
		fail(errInvalidRequest, "code_challenge_method must be S256")
		return
	case !validChallenge(req.CodeChallenge):
		fail(errInvalidRequest, "code_challenge is not a base64url SHA-256")
		return
	}
	var msg string
	if req.Resource, msg = p.resource(q["resource"]); msg != "" {
		fail(errInvalidTarget, msg)
		return
	}
	if req.Scopes, msg = p.scopes(q.Get("scope"), p.s.cfg.Scopes); msg != "" {
		fail(errInvalidScope, msg)
		return
	}
	if err := p.s.store.PutAuthRequest(r.Context(), req, requestTTL); err != nil {
		p.s.deps.Logger.Error("authorize: storing the request", "err", err)
		fail(storeErrorCode(err), "the request could not be stored")
		return
	}
	p.s.login.start(w, r, req)
}

// redirectURI returns the redirect URI of a request: the one asked for
// when the client registered it (registeredRedirect: exact, a loopback
// one on any port, RFC 8252 7.3), or the client's only one when none is
// asked for; either way only while the policy still allows it
// (redirectAllowed), so that narrowing gateway.auth.server.redirectUris
// stops clients registered before.
func (p *provider) redirectURI(c *Client, asked string) (string, bool) {
	if asked == "" {
		if len(c.RedirectURIs) != 1 {
			return "", false
		}
		asked = c.RedirectURIs[0]
	} else if !registeredRedirect(c.RedirectURIs, asked) {
		return "", false
	}
	return asked, p.s.clients.redirectAllowed(asked)
}

// validChallenge reports whether c can be an S256 code challenge: 43
// base64url characters (RFC 7636 4.2).
func validChallenge(c string) bool {
	return len(c) == 43 && !strings.ContainsFunc(c, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_')
	})
}

// resource picks the resource (RFC 8707) of a request among the
// protected targets: the one asked for, or the only one when none is.
// One token is for one target: several are refused.
func (p *provider) resource(asked []string) (string, string) {
	var known []string
	if p.s.deps.Resources != nil {
		known = p.s.deps.Resources()
	}
	switch len(asked) {
	case 0:
		// A target's legacy /sse URL is another name of it, not another
		// target: one protected target lets the parameter be left out.
		var targets []string
		for _, k := range known {
			if !strings.HasSuffix(k, "/sse") {
				targets = append(targets, k)
			}
		}
		if len(targets) == 1 {
			return targets[0], ""
		}
		return "", "resource is required: the URL of the MCP server the token is for"
	case 1:
	default:
		return "", "ask for one resource: a token is for one MCP server"
	}
	want := sameResource(asked[0])
	for _, k := range known {
		if sameResource(k) == want {
			return k, ""
		}
	}
	return "", "resource " + quote(asked[0]) + " is not an MCP server of this gateway"
}

// sameResource is the form two spellings of one resource URL share: the
// scheme and host in lower case, no trailing '/'.
func sameResource(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), strings.TrimRight(u.RawPath, "/")
	return u.String()
}

// scopes reads a space-separated scope parameter against allowed: every
// scope asked must be allowed; none asked is all of allowed.
func (p *provider) scopes(param string, allowed []string) ([]string, string) {
	asked := strings.Fields(param)
	if len(asked) == 0 {
		return slices.Clone(allowed), ""
	}
	var out []string
	for _, s := range asked {
		if !slices.Contains(allowed, s) {
			return nil, "scope " + quote(s) + " is not one of " + strings.Join(allowed, " ")
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, ""
}

// finish is called by the consent page once req.User has consented
// (req stored with User, AuthTime and Consented set): it issues the
// authorization code and redirects the user agent to the client (303).
func (p *provider) finish(w http.ResponseWriter, r *http.Request, req *AuthRequest) {
	noStore(w)
	if req.User == "" || !req.Consented {
		p.refuse(w, r, req, "access_denied", "the request was not consented to")
		return
	}
	code := newSecret()
	if err := p.s.store.PutCode(r.Context(), hashOf(code), req.ID, codeTTL); err != nil {
		p.s.deps.Logger.Error("authorize: storing the code", "err", err)
		p.refuse(w, r, req, storeErrorCode(err), "the code could not be stored")
		return
	}
	// The request now has its code: a second consent of it is refused
	// (consent.go), and only this code redeems it (token.go).
	req.Code = hashOf(code)
	ttl := req.CreatedAt.Add(requestTTL).Sub(p.s.deps.Now())
	if err := p.s.store.PutAuthRequest(r.Context(), req, max(ttl, codeTTL)); err != nil {
		p.s.deps.Logger.Error("authorize: storing the code", "err", err)
		p.refuse(w, r, req, storeErrorCode(err), "the code could not be stored")
		return
	}
	p.s.deps.Logger.Info("authorization code issued", "user", req.User, "client_id", req.ClientID, "resource", req.Resource)
	p.redirect(w, r, req, url.Values{"code": {code}})
}

// refuse sends the user agent back to the client with an OAuth error
// (access_denied when the user denied), and forgets req.
func (p *provider) refuse(w http.ResponseWriter, r *http.Request, req *AuthRequest, code, description string) {
	noStore(w)
	if err := p.s.store.DeleteAuthRequest(r.Context(), req.ID); err != nil {
		p.s.deps.Logger.Warn("authorize: forgetting a refused request", "err", err)
	}
	p.redirectError(w, r, req, code, description)
}

// redirectError sends an error of a request whose client and redirect
// URI are known good to that redirect URI.
func (p *provider) redirectError(w http.ResponseWriter, r *http.Request, req *AuthRequest, code, description string) {
	p.s.deps.Logger.Info("authorize refused", "client_id", req.ClientID, "error", code, "description", description)
	v := url.Values{"error": {code}}
	if description != "" {
		v.Set("error_description", description)
	}
	p.redirect(w, r, req, v)
}

// redirect 303s the user agent to req's redirect URI with v, its state
// and the issuer (RFC 9207: a client talking to several servers knows
// which answered).
func (p *provider) redirect(w http.ResponseWriter, r *http.Request, req *AuthRequest, v url.Values) {
	u, err := url.Parse(req.RedirectURI)
	if err != nil {
		authorizePage(w, http.StatusBadRequest, "The application's return address is not a URL.")
		return
	}
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	if req.State != "" {
		q.Set("state", req.State)
	}
	q.Set("iss", p.s.cfg.Issuer)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}
