package auth

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// introspected is what an issuer's introspection endpoint said of a
// token (RFC 7662 section 2.2), kept for introspectionTTL at most.
type introspected struct {
	active bool
	claims map[string]any
	name   string // sub, username or client_id
	aud    []string
	scopes []string
	exp    time.Time // zero when not given
	nbf    time.Time
}

// introspect checks an opaque token for target t with the issuer that has
// introspection. Results are cached by the token's hash (never the token)
// until the token expires or for introspectionTTL, whichever is sooner: a
// revoked token works at most that long after. Inactive results are
// cached as long, so that a client repeating a bad token does not repeat
// the round trip. Concurrent requests with one token make one call.
func (g *Gate) introspect(ctx context.Context, token string, t Target) (*Principal, *failure) {
	is := g.introspector
	key := sha256.Sum256([]byte(token))
	res, f := g.cache.do(key, g.now(), func() (*introspected, time.Time, *failure) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.fetchTimeout)
		defer cancel()
		res, err := g.callIntrospection(fctx, is.introspection, token)
		if err != nil {
			g.log.Warn("auth: introspection failed", "issuer", is.id, "err", err)
			return nil, time.Time{}, unavailable(5*time.Second, "introspection at %s failed: %v", is.introspection.URL, err)
		}
		until := g.now().Add(introspectionTTL)
		if !res.exp.IsZero() && res.exp.Before(until) {
			until = res.exp
		}
		return res, until, nil
	})
	if f != nil {
		return nil, f
	}
	now := g.now()
	switch {
	case !res.active:
		return nil, invalid("it is not active (revoked, expired or unknown to %s)", is.id)
	case !res.exp.IsZero() && !now.Before(res.exp.Add(leeway)):
		return nil, invalid("expired at %s", res.exp.UTC().Format(time.RFC3339))
	case !res.nbf.IsZero() && now.Add(leeway).Before(res.nbf):
		return nil, invalid("not valid before %s", res.nbf.UTC().Format(time.RFC3339))
	case len(res.aud) == 0:
		// MCP servers must check that a token was issued for them; a
		// response without an audience cannot show it.
		return nil, invalid("the introspection response names no audience (aud); it must name %s", t.Resource)
	case !audienceFits(res.aud, t.Resource, t.Aliases, is.audiences):
		return nil, invalid("its audience %s does not include %s", quoteList(res.aud), t.Resource)
	case res.name == "":
		return nil, invalid("the introspection response names no subject (sub, username or client_id)")
	}
	return &Principal{Name: g.principalName(is.id, res.name), Kind: KindToken, Scopes: slices.Clone(res.scopes),
		Claims: res.claims, Issuer: is.id, Expiry: res.exp}, nil
}

// callIntrospection asks the endpoint about token. A response with
// "active": false is an answer whatever its status (some servers, the
// TypeScript SDK's demo among them, send it with 401); any other status
// but 200 is an error (401 or 403: the gateway's client credentials).
func (g *Gate) callIntrospection(ctx context.Context, in *Introspection, token string) (*introspected, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if in.ClientID != "" {
		// RFC 6749 section 2.3.1: form-encoded before Basic.
		req.SetBasicAuth(url.QueryEscape(in.ClientID), url.QueryEscape(in.ClientSecret))
	}
	resp, err := g.client.Do(req)
	if err != nil {
		// The error names the URL, never the body with the token.
		return nil, err
	}
	defer resp.Body.Close()
	body, err := readBounded(resp.Body)
	if err != nil {
		return nil, err
	}
	// Numbers as float64, as in a JWT's claims: a principal's claims look
	// the same whichever way its token was checked.
	var m map[string]any
	if json.Unmarshal(body, &m) != nil || m == nil {
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("answered %s%s", resp.Status, credentialsHint(resp.StatusCode))
		}
		return nil, fmt.Errorf("the response is not a JSON object")
	}
	active, ok := m["active"].(bool)
	switch {
	case ok && !active:
		return &introspected{}, nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answered %s%s", resp.Status, credentialsHint(resp.StatusCode))
	case !ok:
		return nil, fmt.Errorf(`the response has no boolean "active"`)
	}
	res := &introspected{active: true, claims: m, aud: stringOrList(m["aud"])}
	if len(res.aud) == 0 {
		// Not RFC 7662's, but what some servers give for RFC 8707.
		res.aud = stringOrList(m["resource"])
	}
	if s, ok := m["scope"].(string); ok {
		res.scopes = strings.Fields(s)
	}
	for _, k := range []string{"sub", "username", "client_id"} {
		if s, ok := m[k].(string); ok && s != "" {
			res.name = s
			break
		}
	}
	res.exp = numericDate(m["exp"])
	res.nbf = numericDate(m["nbf"])
	return res, nil
}

// credentialsHint adds a hint to a 401 or 403 from introspection.
func credentialsHint(status int) string {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return " (check the introspection clientId and clientSecret)"
	}
	return ""
}

// stringOrList reads a claim that is a string or an array of strings.
func stringOrList(v any) []string {
	switch v := v.(type) {
	case string:
		if v != "" {
			return []string{v}
		}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// numericDate reads a NumericDate (seconds since the epoch, maybe with a
// fraction); zero when absent or not a number.
func numericDate(v any) time.Time {
	f, ok := v.(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > 1e11 {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// tokenCache holds introspection results by token hash: at most size,
// the least recently used dropped first, each until its own time.
type tokenCache struct {
	mu       sync.Mutex
	size     int
	order    *list.List // of *cacheEntry, most recent first
	entries  map[[sha256.Size]byte]*list.Element
	inflight map[[sha256.Size]byte]*cacheCall
}

type cacheEntry struct {
	key   [sha256.Size]byte
	res   *introspected
	until time.Time
}

// cacheCall is an introspection under way, which others with the same
// token wait for.
type cacheCall struct {
	done chan struct{}
	res  *introspected
	f    *failure
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{size: size, order: list.New(),
		entries: map[[sha256.Size]byte]*list.Element{}, inflight: map[[sha256.Size]byte]*cacheCall{}}
}

// do returns the cached result for key, or calls fetch (once for all the
// callers that come meanwhile) and caches what it returns until until.
// Failures are not cached.
func (c *tokenCache) do(key [sha256.Size]byte, now time.Time, fetch func() (*introspected, time.Time, *failure)) (*introspected, *failure) {
	c.mu.Lock()
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*cacheEntry)
		if now.Before(e.until) {
			c.order.MoveToFront(el)
			c.mu.Unlock()
			return e.res, nil
		}
		c.order.Remove(el)
		delete(c.entries, key)
	}
	if call, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		<-call.done // bounded: the fetch has its own timeout
		return call.res, call.f
	}
	call := &cacheCall{done: make(chan struct{})}
	c.inflight[key] = call
	c.mu.Unlock()

	res, until, f := fetch()

	c.mu.Lock()
	delete(c.inflight, key)
	call.res, call.f = res, f
	close(call.done)
	if f == nil && now.Before(until) {
		c.entries[key] = c.order.PushFront(&cacheEntry{key: key, res: res, until: until})
		for c.order.Len() > c.size {
			old := c.order.Back()
			c.order.Remove(old)
			delete(c.entries, old.Value.(*cacheEntry).key)
		}
	}
	c.mu.Unlock()
	return res, f
}

// len returns how many results are cached.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
