package authserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/crypto"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// The tokens and secrets the server hands out: access tokens (JWTs
// signed with the key ring's derived keys, through go-jose, as
// zitadel/oidc's op signs its own), and opaque random secrets (codes,
// refresh tokens, ids) kept only as their Hash.

// newSecret returns 32 random bytes, base64url: a code, a refresh token,
// a request or grant id, a CSRF token.
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// hashOf is the Hash a Store keeps of secret.
func hashOf(secret string) Hash { return sha256.Sum256([]byte(secret)) }

// mintAccess signs an access token of grant g for scopes (the grant's,
// or fewer) at now: RFC 9068's claims, with gid, the grant it was issued
// under, which the gate asks Store.Revoked about.
func (p *provider) mintAccess(g *Grant, scopes []string, now time.Time) (string, error) {
	key, _ := p.keys.keys()
	if key == nil {
		return "", errors.New("authserver: no signing key")
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key.private},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", key.id))
	if err != nil {
		return "", err
	}
	// Built here rather than by oidc.NewAccessTokenClaims, which reads
	// the wall clock: the tests move p.s.deps.Now.
	claims := &oidc.AccessTokenClaims{
		TokenClaims: oidc.TokenClaims{
			Issuer:     p.s.cfg.Issuer,
			Subject:    g.User,
			Audience:   oidc.Audience{g.Resource},
			Expiration: oidc.FromTime(now.Add(p.s.cfg.AccessTokenTTL)),
			IssuedAt:   oidc.FromTime(now),
			NotBefore:  oidc.FromTime(now),
			ClientID:   g.ClientID,
			JWTID:      newSecret(),
		},
		Scopes: oidc.SpaceDelimitedArray(scopes),
		Claims: map[string]any{"gid": g.ID},
	}
	return crypto.Sign(claims, signer)
}

// verifyAccess checks that raw is an access token of this server whose
// signature verifies with one of the keys of now, and returns its
// claims (expiry is not checked: revoking an expired token is harmless).
func (p *provider) verifyAccess(raw string) (*oidc.AccessTokenClaims, bool) {
	if strings.Count(raw, ".") != 2 {
		return nil, false
	}
	sig, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(sig.Signatures) != 1 {
		return nil, false
	}
	kid := sig.Signatures[0].Header.KeyID
	_, all := p.keys.keys()
	for _, k := range all {
		if k.id != kid {
			continue
		}
		payload, err := sig.Verify(k.public)
		if err != nil {
			return nil, false
		}
		var c oidc.AccessTokenClaims
		if err := c.UnmarshalJSON(payload); err != nil || c.Issuer != p.s.cfg.Issuer {
			return nil, false
		}
		return &c, true
	}
	return nil, false
}
