package authserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// The token endpoint (RFC 6749 3.2): authorization codes (with PKCE,
// RFC 7636) and refresh tokens (rotated on every use, RFC 9700 4.14.2)
// for access tokens, each for one resource (RFC 8707).

// tokenResponse is a successful answer (RFC 6749 5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope,omitempty"`
}

func (p *provider) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxProtocolForm)
	if err := r.ParseForm(); err != nil {
		writeError(w, r, errInvalidRequest, "the form could not be read")
		return
	}
	for k, vs := range r.PostForm {
		if len(vs) > 1 && k != "resource" {
			// RFC 6749 3.2: parameters must not be repeated.
			writeError(w, r, errInvalidRequest, "the request repeats "+k)
			return
		}
	}
	client, ok := p.authenticate(w, r)
	if !ok {
		return
	}
	switch gt := r.PostForm.Get("grant_type"); gt {
	case string(oidc.GrantTypeCode):
		p.redeemCode(w, r, client)
	case string(oidc.GrantTypeRefreshToken):
		p.refresh(w, r, client)
	case "":
		writeError(w, r, errInvalidRequest, "grant_type is required")
	default:
		writeError(w, r, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

// authenticate finds the client of a token or revocation request and
// checks its credentials (RFC 6749 2.3.1): a public client sends its
// client_id only; a confidential one its secret, by HTTP Basic or in
// the form, as it registered. On failure it has answered.
func (p *provider) authenticate(w http.ResponseWriter, r *http.Request) (*Client, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		// RFC 6749 2.3.1: both are form-encoded inside Basic.
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			writeError(w, r, errInvalidClient, "malformed Basic credentials")
			return nil, false
		}
		if form := r.PostForm.Get("client_id"); form != "" && form != id {
			writeError(w, r, errInvalidRequest, "client_id differs from the Basic credentials")
			return nil, false
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id == "" {
		writeError(w, r, errInvalidClient, "client_id is required")
		return nil, false
	}
	c, err := p.s.clients.client(r.Context(), id)
	if errors.Is(err, ErrUnavailable) {
		// Not invalid_client: a client told so may drop its registration.
		p.s.deps.Logger.Error("token: looking up the client", "err", err)
		writeError(w, r, errUnavailable, "the client could not be looked up; try again")
		return nil, false
	}
	if err != nil {
		writeError(w, r, errInvalidClient, "unknown client")
		return nil, false
	}
	method := "client_secret_post"
	switch {
	case secret == "": // also Basic with an empty password, as some public clients send
		method = "none"
	case basic:
		method = "client_secret_basic"
	}
	want := c.AuthMethod
	if want == "" {
		want = "none"
	}
	// A confidential client's secret is taken by either method, whatever
	// it registered: clients pick from the metadata's list, and both
	// carry the same secret. A public client sends none; one that sends
	// a secret, or a confidential one that sends none, is refused.
	if (method == "none") != (want == "none") {
		writeError(w, r, errInvalidClient, "the client authenticates with "+want)
		return nil, false
	}
	if want != "none" {
		h := hashOf(secret)
		if c.SecretHash == (Hash{}) || subtle.ConstantTimeCompare(h[:], c.SecretHash[:]) != 1 {
			p.s.deps.Logger.Info("token refused: wrong client secret", "client_id", c.ID)
			writeError(w, r, errInvalidClient, "wrong client credentials")
			return nil, false
		}
	}
	return c, true
}

// redeemCode exchanges an authorization code for the first tokens of a
// new grant. A code presented twice revokes the grant of its first
// redemption (RFC 6749 4.1.2): whoever came second, one of the two was
// not the client.
func (p *provider) redeemCode(w http.ResponseWriter, r *http.Request, c *Client) {
	ctx := r.Context()
	form := r.PostForm
	code := form.Get("code")
	if code == "" {
		writeError(w, r, errInvalidRequest, "code is required")
		return
	}
	h := hashOf(code)
	reqID, err := p.s.store.TakeCode(ctx, h)
	switch {
	case errors.Is(err, ErrReused):
		p.s.deps.Logger.Warn("authorization code replayed: its grant is revoked", "client_id", c.ID)
		writeError(w, r, errInvalidGrant, "the code was already used; the tokens issued for it are revoked")
		return
	case errors.Is(err, ErrNotFound):
		writeError(w, r, errInvalidGrant, "unknown or expired code")
		return
	case err != nil:
		p.s.deps.Logger.Error("token: redeeming a code", "err", err)
		writeError(w, r, storeErrorCode(err), "the code could not be checked")
		return
	}
	req, err := p.s.store.AuthRequest(ctx, reqID)
	if err != nil {
		writeError(w, r, errInvalidGrant, "the code's request expired")
		return
	}
	switch {
	case req.Code != h:
		writeError(w, r, errInvalidGrant, "the code was superseded by another answer to the same request")
		return
	case req.ClientID != c.ID:
		writeError(w, r, errInvalidGrant, "the code was issued to another client")
		return
	case form.Has("redirect_uri") && form.Get("redirect_uri") != req.RedirectURI:
		writeError(w, r, errInvalidGrant, "redirect_uri differs from the authorization request's")
		return
	case form.Get("code_verifier") == "":
		writeError(w, r, errInvalidGrant, "code_verifier is required (PKCE)")
		return
	case !oidc.VerifyCodeChallenge(&oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: oidc.CodeChallengeMethodS256}, form.Get("code_verifier")):
		writeError(w, r, errInvalidGrant, "code_verifier does not match the code_challenge")
		return
	case req.User == "" || !req.Consented:
		writeError(w, r, errInvalidGrant, "the request was not consented to")
		return
	}
	if msg := sameResourceAsked(form["resource"], req.Resource); msg != "" {
		writeError(w, r, errInvalidTarget, msg)
		return
	}
	scopes, msg := narrowed(p, form, req.Scopes)
	if msg != "" {
		writeError(w, r, errInvalidScope, msg)
		return
	}
	now := p.s.deps.Now()
	refresh := newSecret()
	g := &Grant{
		ID: newSecret(), User: req.User, ClientID: c.ID, Resource: req.Resource, Scopes: slices.Clone(req.Scopes),
		CreatedAt: now, LastUsed: now, Refresh: hashOf(refresh), Expires: now.Add(p.s.cfg.RefreshTokenTTL),
	}
	if err := p.s.store.PutGrant(ctx, g); err != nil {
		p.s.deps.Logger.Error("token: storing a grant", "err", err)
		writeError(w, r, storeErrorCode(err), "the grant could not be stored")
		return
	}
	if err := p.s.store.CodeGrant(ctx, h, g.ID); errors.Is(err, ErrReused) {
		// The code was replayed while it was being redeemed: one of the
		// two was not the client. The Store revoked the grant.
		p.s.deps.Logger.Warn("authorization code replayed during its redemption: its grant is revoked", "client_id", c.ID)
		writeError(w, r, errInvalidGrant, "the code was used twice; the tokens issued for it are revoked")
		return
	} else if err != nil {
		// Without the link a replay of the code could not revoke the
		// grant: give nothing out for it.
		p.revokeQuietly(ctx, g.ID)
		p.s.deps.Logger.Error("token: recording the code's grant", "err", err)
		writeError(w, r, storeErrorCode(err), "the grant could not be stored")
		return
	}
	if err := p.s.store.DeleteAuthRequest(ctx, req.ID); err != nil {
		p.s.deps.Logger.Warn("token: forgetting a redeemed request", "err", err)
	}
	p.issue(w, r, g, scopes, refresh)
}

// refresh rotates a refresh token: the old one stops working, a new one
// and an access token come back. A replaced token presented again
// revokes its grant (the Store did): the token was stolen, or the client
// lost track, and either way the grant is no longer safe.
func (p *provider) refresh(w http.ResponseWriter, r *http.Request, c *Client) {
	ctx := r.Context()
	form := r.PostForm
	old := form.Get("refresh_token")
	if old == "" {
		writeError(w, r, errInvalidRequest, "refresh_token is required")
		return
	}
	// The request is checked against the token's grant before the token
	// rotates: a refused request leaves the client its token. A replaced
	// token goes straight to Rotate, which treats it as reuse.
	h := hashOf(old)
	found, err := p.s.store.RefreshGrant(ctx, h)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, r, errInvalidGrant, "unknown, expired or revoked refresh token")
		return
	case err != nil:
		p.s.deps.Logger.Error("token: finding a refresh token's grant", "err", err)
		writeError(w, r, storeErrorCode(err), "the refresh token could not be checked")
		return
	}
	var scopes []string
	if found.Refresh == h {
		if found.ClientID != c.ID {
			// Another client holds this client's token: stolen.
			p.revokeQuietly(ctx, found.ID)
			p.s.deps.Logger.Warn("refresh token of another client: its grant is revoked", "client_id", c.ID, "grant_client_id", found.ClientID)
			writeError(w, r, errInvalidGrant, "the refresh token was issued to another client")
			return
		}
		if !p.s.login.passwords.known(found.User) {
			// The operator removed the user: their grants end with them.
			p.revokeQuietly(ctx, found.ID)
			p.s.deps.Logger.Info("refresh of a removed user's grant: revoked", "client_id", c.ID, "user", found.User)
			writeError(w, r, errInvalidGrant, "the grant's user may no longer sign in; it is revoked")
			return
		}
		if msg := sameResourceAsked(form["resource"], found.Resource); msg != "" {
			writeError(w, r, errInvalidTarget, msg)
			return
		}
		var msg string
		if scopes, msg = narrowed(p, form, found.Scopes); msg != "" {
			writeError(w, r, errInvalidScope, msg)
			return
		}
	}
	now := p.s.deps.Now()
	next := newSecret()
	g, err := p.s.store.Rotate(ctx, h, hashOf(next), now.Add(p.s.cfg.RefreshTokenTTL))
	switch {
	case errors.Is(err, ErrReused):
		p.s.deps.Logger.Warn("refresh token reused: its grant is revoked", "client_id", c.ID)
		writeError(w, r, errInvalidGrant, "the refresh token was already used; its grant is revoked")
		return
	case errors.Is(err, ErrNotFound):
		writeError(w, r, errInvalidGrant, "unknown, expired or revoked refresh token")
		return
	case err != nil:
		p.s.deps.Logger.Error("token: rotating a refresh token", "err", err)
		writeError(w, r, storeErrorCode(err), "the refresh token could not be checked")
		return
	}
	if g.ID != found.ID || found.Refresh != h {
		// Cannot happen (a token names one grant for good, and a replaced
		// one never rotates); refuse rather than issue under checks made
		// on another grant.
		p.revokeQuietly(ctx, g.ID)
		writeError(w, r, errInvalidGrant, "the refresh token changed grants")
		return
	}
	p.issue(w, r, g, scopes, next)
}

// narrowed returns the scopes of a token request: those of granted, or
// fewer when its scope parameter asks (RFC 6749 6: never more).
func narrowed(p *provider, form url.Values, granted []string) ([]string, string) {
	if !form.Has("scope") {
		return granted, ""
	}
	return p.scopes(form.Get("scope"), granted)
}

// sameResourceAsked checks the resource parameters of a token request:
// none, or the one the grant is for.
func sameResourceAsked(asked []string, resource string) string {
	switch {
	case len(asked) == 0:
		return ""
	case len(asked) > 1:
		return "ask for one resource: a token is for one MCP server"
	case sameResource(asked[0]) != sameResource(resource):
		return "resource " + quote(asked[0]) + " is not the one this grant is for"
	}
	return ""
}

// issue answers the tokens of grant g: an access token for scopes, and
// refresh, its refresh token.
func (p *provider) issue(w http.ResponseWriter, r *http.Request, g *Grant, scopes []string, refresh string) {
	access, err := p.mintAccess(g, scopes, p.s.deps.Now())
	if err != nil {
		p.s.deps.Logger.Error("token: signing", "err", err)
		writeError(w, r, errServerError, "the token could not be signed")
		return
	}
	writeJSON(w, http.StatusOK, tokenResponse{
		AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(p.s.cfg.AccessTokenTTL.Seconds()),
		RefreshToken: refresh, Scope: strings.Join(scopes, " "),
	})
}

// revokeQuietly revokes a grant on a path that already fails, logging
// what cannot be done.
func (p *provider) revokeQuietly(ctx context.Context, id string) {
	if err := p.s.store.RevokeGrant(ctx, id); err != nil {
		p.s.deps.Logger.Error("revoking a grant", "grant", id, "err", err)
	}
}
