package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// checkJWT checks a JWT access token for target t: signed (with an
// accepted algorithm) by a key of the issuer its "iss" names, current
// (exp, required, and nbf, with leeway), for t (its "aud" names t's
// resource URL, RFC 8707, or one of the issuer's extra audiences), and
// naming a subject. Signatures and times are golang-jwt's; the issuer,
// key and audience are picked here, to say which failed.
func (g *Gate) checkJWT(ctx context.Context, raw string, t Target) (*Principal, *failure) {
	parser := jwt.NewParser(
		jwt.WithValidMethods(g.algorithms),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(g.now),
		jwt.WithExpirationRequired(),
	)
	// A first look, trusting nothing, to find the issuer and key.
	claims := jwt.MapClaims{}
	tok, _, err := parser.ParseUnverified(raw, claims)
	if tok == nil || errors.Is(err, jwt.ErrTokenMalformed) {
		return nil, invalid("malformed JWT")
	}
	alg, _ := tok.Header["alg"].(string)
	if !slices.Contains(g.algorithms, alg) {
		return nil, invalid("algorithm %s is not accepted (accepted: %s)", quoteClaim(alg), strings.Join(g.algorithms, ", "))
	}
	if err != nil {
		return nil, invalid("malformed JWT")
	}
	if _, ok := tok.Header["crit"]; ok {
		// RFC 7515 section 4.1.11: extensions the gateway does not know
		// must make it refuse the token.
		return nil, invalid("it has critical header parameters (crit)")
	}
	iss, _ := claims["iss"].(string)
	is := g.byID[iss]
	switch {
	case iss == "":
		return nil, invalid("it names no issuer (iss)")
	case is == nil:
		return nil, invalid("issuer %s is not trusted", quoteClaim(iss))
	case !slices.Contains(is.algorithms, alg):
		return nil, invalid("algorithm %s is not accepted from %s (accepted: %s)", alg, iss, strings.Join(is.algorithms, ", "))
	}
	kid, _ := tok.Header["kid"].(string)
	var (
		keys []jwt.VerificationKey
		f    *failure
	)
	if is.local != nil {
		keys, f = is.localKeys(kid, alg)
	} else {
		keys, f = is.keys.lookup(ctx, kid, alg)
	}
	if f != nil {
		return nil, f
	}

	// The real parse: signature, then times.
	claims = jwt.MapClaims{}
	_, err = parser.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) {
		return jwt.VerificationKeySet{Keys: keys}, nil
	})
	if err != nil {
		return nil, jwtFailure(err, claims, kid, iss)
	}
	aud, err := claims.GetAudience()
	switch {
	case err != nil || len(aud) == 0:
		return nil, invalid("it names no audience (aud); it must name %s", t.Resource)
	case !audienceFits(aud, t.Resource, t.Aliases, is.audiences):
		return nil, invalid("its audience %s does not include %s", quoteList(aud), t.Resource)
	}
	name, _ := claims["sub"].(string)
	if name == "" {
		name, _ = claims["client_id"].(string)
	}
	if name == "" {
		return nil, invalid("it names no subject (sub)")
	}
	if is.revoked != nil && is.revoked(claims) {
		return nil, invalid("it was revoked")
	}
	p := &Principal{Name: g.principalName(iss, name), Kind: KindToken, Scopes: tokenScopes(claims), Claims: claims, Issuer: iss}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		p.Expiry = exp.Time
	}
	return p, nil
}

// jwtFailure says what golang-jwt found wrong with a token.
func jwtFailure(err error, claims jwt.MapClaims, kid, iss string) *failure {
	at := func(get func() (*jwt.NumericDate, error)) string {
		if d, err := get(); err == nil && d != nil {
			return d.UTC().Format(time.RFC3339)
		}
		return "?"
	}
	switch {
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if kid != "" {
			return invalid("its signature does not verify with key %s of %s", quoteClaim(kid), iss)
		}
		return invalid("its signature does not verify with any key of %s", iss)
	case errors.Is(err, jwt.ErrInvalidType):
		return invalid("a time claim (exp, nbf, iat) is not a number")
	case errors.Is(err, jwt.ErrTokenExpired):
		return invalid("expired at %s", at(claims.GetExpirationTime))
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return invalid("not valid before %s", at(claims.GetNotBefore))
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return invalid("it has no expiry (exp)")
	case errors.Is(err, jwt.ErrTokenMalformed):
		return invalid("malformed JWT")
	}
	return invalid("%v", err)
}

// principalName is a token principal's name: its subject, prefixed by
// its issuer when several are trusted (the same "sub" from two issuers
// is two people).
func (g *Gate) principalName(iss, sub string) string {
	if len(g.issuers) > 1 {
		return iss + "#" + sub
	}
	return sub
}

// tokenScopes reads a token's scopes: "scope", a space-separated string
// (RFC 8693, RFC 9068), or "scp", an array or string (Okta, Microsoft
// Entra).
func tokenScopes(claims map[string]any) []string {
	var scopes []string
	if s, ok := claims["scope"].(string); ok {
		scopes = strings.Fields(s)
	}
	switch v := claims["scp"].(type) {
	case string:
		scopes = append(scopes, strings.Fields(v)...)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				scopes = append(scopes, s)
			}
		}
	}
	return scopes
}

// quoteClaim quotes a value a token's sender chose, short, for a reason.
func quoteClaim(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// quoteList quotes a few values of a token for a reason.
func quoteList(list []string) string {
	var out []string
	for i, s := range list {
		if i == 3 {
			out = append(out, fmt.Sprintf("and %d more", len(list)-3))
			break
		}
		out = append(out, quoteClaim(s))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// localKeys returns the keys of an issuer with an in-process key source
// (Issuer.Keys) that may have signed a token of alg naming kid.
func (is *issuer) localKeys(kid, alg string) ([]jwt.VerificationKey, *failure) {
	var fit []jwt.VerificationKey
	known := false
	for _, pk := range is.local() {
		if kid != "" && pk.ID != kid {
			continue
		}
		known = true
		if (jwk{kid: pk.ID, alg: pk.Algorithm, key: pk.Key}).fits(alg) {
			fit = append(fit, pk.Key)
		}
	}
	switch {
	case len(fit) > 0:
		return fit, nil
	case kid != "" && known:
		return nil, invalid("key %s of %s is not a key for %s", quoteClaim(kid), is.id, alg)
	case kid != "":
		return nil, invalid("unknown key id %s (not a key of %s)", quoteClaim(kid), is.id)
	}
	return nil, invalid("no key of %s is for %s", is.id, alg)
}
