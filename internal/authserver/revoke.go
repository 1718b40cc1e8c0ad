package authserver

import (
	"errors"
	"net/http"
)

// The revocation endpoint (RFC 7009): a refresh token or an access token
// of a client ends its grant, so every token of the grant stops at once
// (the gate asks Store.Revoked about an access token's grant).

func (p *provider) revoke(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxProtocolForm)
	if err := r.ParseForm(); err != nil {
		writeError(w, r, errInvalidRequest, "the form could not be read")
		return
	}
	c, ok := p.authenticate(w, r)
	if !ok {
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		writeError(w, r, errInvalidRequest, "token is required")
		return
	}
	ctx := r.Context()
	gid := ""
	// The hint is only a hint (RFC 7009 2.1): both kinds are tried.
	if claims, ok := p.verifyAccess(token); ok {
		if claims.ClientID == c.ID {
			gid, _ = claims.Claims["gid"].(string)
		}
	} else if g, err := p.grantOfRefresh(r, token); err != nil {
		// Not answered 200: the client would drop a token that still
		// works, believing it revoked (RFC 7009 2.2.1 lets us say so).
		p.s.deps.Logger.Error("revoke: finding a refresh token's grant", "err", err)
		writeError(w, r, storeErrorCode(err), "the token could not be checked; try again")
		return
	} else if g != nil && g.ClientID == c.ID {
		gid = g.ID
	}
	if gid != "" {
		if err := p.s.store.RevokeGrant(ctx, gid); err != nil {
			p.s.deps.Logger.Error("revoke: revoking a grant", "err", err)
			writeError(w, r, storeErrorCode(err), "the grant could not be revoked")
			return
		}
		p.s.deps.Logger.Info("grant revoked by its client", "client_id", c.ID)
	}
	// An unknown token, or another client's, is answered the same:
	// RFC 7009 2.2, and nothing is learnt about other clients' tokens.
	noStore(w)
	w.WriteHeader(http.StatusOK)
}

// grantOfRefresh finds the grant whose current or replaced refresh
// token is token: nil when there is none, an error when the Store
// cannot say.
func (p *provider) grantOfRefresh(r *http.Request, token string) (*Grant, error) {
	g, err := p.s.store.RefreshGrant(r.Context(), hashOf(token))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return g, err
}
