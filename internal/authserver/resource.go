package authserver

import "crypto/ed25519"

// What the gateway's resource server (internal/auth's Gate) asks of the
// server it trusts in process: its keys, without an HTTP fetch to
// itself, and whether a token's grant was revoked.

// PublicKey is a verification key of the server's access tokens (alg
// EdDSA).
type PublicKey struct {
	ID  string
	Key ed25519.PublicKey
}

// Issuer is the server's issuer identifier, its tokens' "iss".
func (s *Server) Issuer() string { return s.cfg.Issuer }

// PublicKeys returns the keys that verify the server's access tokens
// now: one per ring key (or the seed's). It is cheap: the gate calls it
// for every token.
func (s *Server) PublicKeys() []PublicKey {
	_, all := s.provider.keys.keys()
	out := make([]PublicKey, len(all))
	for i, sk := range all {
		out[i] = PublicKey{ID: sk.id, Key: sk.public}
	}
	return out
}

// Revoked reports whether the access token of claims was issued under a
// grant since revoked (RFC 7009, a reused refresh token or code, the
// admin page): the gate refuses it at once rather than when it expires.
// A token without a grant id is not one of ours and is not refused
// here.
func (s *Server) Revoked(claims map[string]any) bool {
	gid, _ := claims["gid"].(string)
	return gid != "" && s.store.Revoked(gid)
}
