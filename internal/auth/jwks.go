package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// keySet is an issuer's JSON Web Key Set as the gateway last fetched it.
// It is fetched by the first token that needs it, again when it is older
// than KeySetMaxAge, and when a token names a key it lacks (a rotation:
// issuers often sign with a new key as soon as they publish it). Those
// misses refetch at most once per KeySetMinInterval, counted from the
// previous miss, not from the first fetch (a rotation right after it
// works), so that tokens with made-up key ids cannot make the gateway
// hammer the issuer; after a failed fetch nothing is fetched for
// KeySetRetry. One request fetches; the others wait for it. A set that
// cannot be fetched again keeps being used (an issuer's outage does not
// lock everyone out); one never fetched answers 503.
type keySet struct {
	g      *Gate
	issuer string
	url    string // jwksUrl of the config; "" to discover

	mu         sync.Mutex
	discovered string // jwks_uri of the issuer's metadata, once found
	keys       []jwk
	fetched    bool
	fetchedAt  time.Time // of the keys
	triedAt    time.Time // of the latest fetch, whatever its outcome
	missAt     time.Time // of the latest fetch for a key the set lacked
	lastErr    error     // of the latest fetch
	inflight   chan struct{}
}

// jwk is one verification key of a set.
type jwk struct {
	kid string
	alg string // "" when the set does not say
	key any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// lookup returns the keys that may have signed a token of algorithm alg
// naming key id kid ("" for none: every key of the algorithm), fetching
// the set as the keySet comment says.
func (s *keySet) lookup(ctx context.Context, kid, alg string) ([]jwt.VerificationKey, *failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refreshed := false
	for {
		now := s.g.now()
		fit, known := s.find(kid, alg)
		stale := !s.fetched || now.Sub(s.fetchedAt) >= s.g.keySetMaxAge
		miss := !stale && len(fit) == 0
		if (stale || miss) && !refreshed {
			if ch := s.inflight; ch != nil {
				// Fix: a set that is merely due for its periodic refetch,
				// and has keys for this token, is used at once rather than
				// waiting for another request's fetch: an issuer that hangs
				// must cost the refetching request FetchTimeout, not every
				// request (the set stays in use if that fetch fails anyway).
				if s.fetched && !miss && len(fit) > 0 {
					return fit, nil
				}
				s.mu.Unlock()
				select {
				case <-ch:
				case <-ctx.Done():
					s.mu.Lock()
					return nil, unavailable(time.Second, "waiting for the keys of %s: %v", s.issuer, ctx.Err())
				}
				s.mu.Lock()
				refreshed = true
				continue
			}
			if s.mayFetch(now, miss) {
				if miss {
					s.missAt = now
				}
				s.refresh(ctx, now)
				refreshed = true
				continue
			}
		}
		switch {
		case len(fit) > 0:
			return fit, nil
		case !s.fetched:
			retry := max(s.triedAt.Add(s.g.keySetRetry).Sub(now), time.Second)
			return nil, unavailable(retry, "the keys of %s could not be fetched: %v", s.issuer, s.lastErr)
		case kid != "" && known:
			return nil, invalid("key %s of %s is not a key for %s", quoteClaim(kid), s.issuer, alg)
		case kid != "":
			return nil, invalid("unknown key id %s (not in the key set of %s, fetched %s ago)", quoteClaim(kid), s.issuer, now.Sub(s.fetchedAt).Round(time.Second))
		}
		return nil, invalid("no key of %s is for %s", s.issuer, alg)
	}
}

// find returns the keys of the set for kid and alg, and whether kid is
// in the set at all.
func (s *keySet) find(kid, alg string) (fit []jwt.VerificationKey, known bool) {
	for _, k := range s.keys {
		if kid != "" && k.kid != kid {
			continue
		}
		known = true
		if k.fits(alg) {
			fit = append(fit, k.key)
		}
	}
	return fit, known
}

// mayFetch reports whether the rate limits let the set be fetched now,
// for a key it lacks (miss) or because it has none or is old.
func (s *keySet) mayFetch(now time.Time, miss bool) bool {
	if s.lastErr != nil && now.Sub(s.triedAt) < s.g.keySetRetry {
		return false
	}
	return !miss || s.missAt.IsZero() || now.Sub(s.missAt) >= s.g.keySetMinInterval
}

// refresh fetches the set; s.mu is held on entry and exit, not during
// the fetch. The fetch is not the request's: a client that goes away
// does not fail it for the others waiting.
func (s *keySet) refresh(ctx context.Context, now time.Time) {
	ch := make(chan struct{})
	s.inflight, s.triedAt = ch, now
	u := s.url
	if u == "" {
		u = s.discovered
	}
	s.mu.Unlock()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.g.fetchTimeout)
	keys, u, err := s.fetch(fctx, u)
	cancel()
	s.mu.Lock()
	s.inflight = nil
	close(ch)
	s.lastErr = err
	if err != nil {
		s.discovered = "" // found again next time: the issuer may have moved it
		s.mu.Unlock()
		s.g.log.Warn("auth: cannot fetch the key set", "issuer", s.issuer, "err", err)
		s.mu.Lock()
		return
	}
	changed := !slices.EqualFunc(s.keys, keys, func(a, b jwk) bool { return a.kid == b.kid })
	s.keys, s.fetched, s.fetchedAt = keys, true, s.g.now()
	if s.url == "" {
		s.discovered = u
	}
	if changed {
		kids := make([]string, len(keys))
		for i, k := range keys {
			kids[i] = k.kid
		}
		s.mu.Unlock()
		s.g.log.Info("auth: key set fetched", "issuer", s.issuer, "url", u, "kids", kids)
		s.mu.Lock()
	}
}

// fetch gets and parses the set at u, discovering u first when it is "".
func (s *keySet) fetch(ctx context.Context, u string) ([]jwk, string, error) {
	if u == "" {
		var err error
		if u, err = s.discover(ctx); err != nil {
			return nil, "", err
		}
	}
	body, _, err := s.g.get(ctx, u)
	if err != nil {
		return nil, u, err
	}
	keys, skipped, err := parseJWKS(body)
	if err != nil {
		return nil, u, fmt.Errorf("%s: %w", u, err)
	}
	if len(skipped) > 0 {
		// Sets often hold encryption keys too; not an error.
		s.g.log.Debug("auth: keys not used", "issuer", s.issuer, "url", u, "skipped", skipped)
	}
	if len(keys) == 0 {
		return nil, u, fmt.Errorf("%s has no signing key the gateway accepts (%s)", u, strings.Join(skipped, "; "))
	}
	return keys, u, nil
}

// metadataURLs are where an issuer's metadata may be, in the order MCP
// clients try them: RFC 8414 with the path inserted after the well-known
// prefix, OpenID Connect discovery the same way, then OpenID Connect
// discovery appended to the issuer (Keycloak, Auth0 and most others).
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimRight(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}
}

// discover finds the issuer's jwks_uri in its metadata. A document that
// names another issuer is not used (RFC 8414 section 3.3): it could point
// at anyone's keys.
func (s *keySet) discover(ctx context.Context) (string, error) {
	var tried []string
	for _, u := range metadataURLs(s.issuer) {
		body, _, err := s.g.get(ctx, u)
		if err != nil {
			tried = append(tried, err.Error())
			if ctx.Err() != nil {
				break
			}
			continue
		}
		var m struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		switch err := json.Unmarshal(body, &m); {
		case err != nil:
			tried = append(tried, u+": not a JSON object")
		case m.Issuer != s.issuer:
			tried = append(tried, fmt.Sprintf("%s: names issuer %q", u, m.Issuer))
		case m.JWKSURI == "":
			tried = append(tried, u+": has no jwks_uri")
		case !secureURL(m.JWKSURI):
			tried = append(tried, fmt.Sprintf("%s: jwks_uri %q is not https", u, m.JWKSURI))
		default:
			return m.JWKSURI, nil
		}
	}
	return "", fmt.Errorf("no metadata of %s gives its keys (set jwksUrl): %s", s.issuer, strings.Join(tried, "; "))
}

// secureURL reports whether u is https, or http on a loopback host.
func secureURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := strings.ToLower(u.Hostname())
		return h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "::1" || strings.HasPrefix(h, "127.")
	}
	return false
}

// get fetches a JSON document of at most maxDocumentBytes. Any status but
// 200 is an error naming it.
func (g *Gate) get(ctx context.Context, u string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := readBounded(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return body, resp.StatusCode, nil
}

// readBounded reads r up to maxDocumentBytes.
func readBounded(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, maxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxDocumentBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxDocumentBytes)
	}
	return body, nil
}

// newClient is the Gate's own HTTP client. Redirects are followed for
// GETs (metadata and key sets move) but not for introspection, whose
// request carries the token and the gateway's client secret.
func newClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.Method != http.MethodGet && req.Method != http.MethodHead {
				return http.ErrUseLastResponse
			}
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			if !secureURL(req.URL.String()) {
				return fmt.Errorf("redirected to %s, which is not https", req.URL.Redacted())
			}
			return nil
		},
	}
}

// rawJWK is a JSON Web Key (RFC 7517) as a set holds it: the members a
// public signature key of the accepted algorithms has.
type rawJWK struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	Crv    string   `json:"crv"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
	D      string   `json:"d"`
}

// parseJWKS parses a JSON Web Key Set into its usable signature keys; the
// others are described in skipped.
func parseJWKS(data []byte) (keys []jwk, skipped []string, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil || set.Keys == nil {
		return nil, nil, errors.New(`not a JSON Web Key Set (an object with "keys")`)
	}
	for i, raw := range set.Keys {
		var r rawJWK
		if err := json.Unmarshal(raw, &r); err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d: not a JSON Web Key", i))
			continue
		}
		k, err := r.parse()
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %v", i, r.Kid, err))
			continue
		}
		keys = append(keys, k)
	}
	return keys, skipped, nil
}

// parse turns r into a public key of the standard library, which checks
// it (an EC point on its curve; an RSA key's size and exponent when used).
func (r rawJWK) parse() (jwk, error) {
	k := jwk{kid: r.Kid, alg: r.Alg}
	switch {
	case r.Use != "" && r.Use != "sig":
		return k, fmt.Errorf("for use %q, not signatures", r.Use)
	case r.KeyOps != nil && !slices.Contains(r.KeyOps, "verify"):
		return k, errors.New("its key_ops do not include verify")
	case r.Alg != "" && !slices.Contains(AllowedAlgorithms, r.Alg):
		return k, fmt.Errorf("algorithm %q is not accepted", r.Alg)
	case r.D != "":
		// A private key in a public set is the issuer's mistake; using
		// its public half would be harmless, but it is a sign the set is
		// not what it should be.
		return k, errors.New("it is a private key")
	}
	switch r.Kty {
	case "RSA":
		n, err1 := b64(r.N)
		e, err2 := b64(r.E)
		if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 {
			return k, errors.New("RSA key without valid n and e")
		}
		N, E := new(big.Int).SetBytes(n), new(big.Int).SetBytes(e)
		if N.BitLen() < 2048 {
			return k, fmt.Errorf("RSA key of %d bits (at least 2048)", N.BitLen())
		}
		if !E.IsInt64() || E.Int64() < 3 || E.Int64() > 1<<31-1 || E.Bit(0) == 0 {
			return k, errors.New("RSA key with an invalid exponent")
		}
		k.key = &rsa.PublicKey{N: N, E: int(E.Int64())}
	case "EC":
		var curve elliptic.Curve
		switch r.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return k, fmt.Errorf("EC curve %q is not P-256, P-384 or P-521", r.Crv)
		}
		size := (curve.Params().BitSize + 7) / 8
		x, err1 := b64(r.X)
		y, err2 := b64(r.Y)
		if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
			return k, fmt.Errorf("%s key without valid x and y", r.Crv)
		}
		point := append(append([]byte{4}, x...), y...)
		pk, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return k, fmt.Errorf("%s key: %v", r.Crv, err)
		}
		k.key = pk
	case "OKP":
		x, err := b64(r.X)
		if r.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return k, fmt.Errorf("OKP key that is not a valid Ed25519 key (crv %q)", r.Crv)
		}
		k.key = ed25519.PublicKey(x)
	case "oct":
		return k, errors.New("a symmetric key (kty oct) is never used")
	default:
		return k, fmt.Errorf("key type %q is not RSA, EC or OKP", r.Kty)
	}
	if k.alg != "" && !k.fits(k.alg) {
		return k, fmt.Errorf("a %s key cannot be for %s", r.Kty, k.alg)
	}
	return k, nil
}

// b64 decodes base64url, with or without padding.
func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// fits reports whether k may verify a signature of algorithm alg: its
// own "alg" when the set gives one, else its type (and curve).
func (k jwk) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch pk := k.key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		switch pk.Curve.Params().Name {
		case "P-256":
			return alg == "ES256"
		case "P-384":
			return alg == "ES384"
		case "P-521":
			return alg == "ES512"
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}
