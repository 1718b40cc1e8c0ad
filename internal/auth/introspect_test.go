package auth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeIntrospection is an RFC 7662 endpoint: tokens it knows answer as
// set, others inactive (with 401, as the TypeScript SDK's demo does). It
// checks the gateway's client credentials and counts calls.
type fakeIntrospection struct {
	srv *httptest.Server

	mu      sync.Mutex
	tokens  map[string]map[string]any
	calls   int
	status  int           // 0: answer
	gate    chan struct{} // if set, calls wait for it to close
	entered chan struct{} // gets a value when a call comes
}

func newFakeIntrospection(t *testing.T) *fakeIntrospection {
	t.Helper()
	f := &fakeIntrospection{tokens: map[string]map[string]any{}, entered: make(chan struct{}, 1)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls++
		status, gate := f.status, f.gate
		f.mu.Unlock()
		select {
		case f.entered <- struct{}{}:
		default:
		}
		if gate != nil {
			<-gate
		}
		id, secret, ok := r.BasicAuth()
		if !ok || id != "gw%3A1" || secret != "s%26cret" || r.Method != http.MethodPost ||
			r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || r.PostFormValue("token_type_hint") != "access_token" {
			http.Error(w, `{"error": "invalid_client"}`, http.StatusUnauthorized)
			return
		}
		if status != 0 {
			http.Error(w, "down", status)
			return
		}
		f.mu.Lock()
		resp, ok := f.tokens[r.PostFormValue("token")]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]any{"active": false, "error": "Unauthorized"})
			return
		}
		writeJSON(w, resp)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIntrospection) set(token string, resp map[string]any) {
	f.mu.Lock()
	f.tokens[token] = resp
	f.mu.Unlock()
}

func (f *fakeIntrospection) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func introspectionConfig(f *fakeIntrospection, keys ...APIKey) Config {
	return Config{
		Issuers: []Issuer{{Issuer: "https://as.example.com", Audiences: []string{"mcpgate"},
			Introspection: &Introspection{URL: f.srv.URL, ClientID: "gw:1", ClientSecret: "s&cret"}}},
		Scopes:   []string{"mcp"},
		APIKeys:  keys,
		Required: true,
	}
}

// TestIntrospection: an opaque token is introspected: active with the
// right audience (aud, or resource) is a principal, inactive is 401; the
// result is reused for a minute at most, and no longer than the token
// lives.
func TestIntrospection(t *testing.T) {
	clk := newClock()
	f := newFakeIntrospection(t)
	now := clk.Now().Unix()
	f.set("tok-alice", map[string]any{"active": true, "sub": "alice", "aud": memory.Resource, "scope": "mcp tools",
		"exp": now + 3600, "client_id": "claude"})
	f.set("tok-client", map[string]any{"active": true, "client_id": "claude", "resource": []string{memory.Resource}, "scope": "mcp",
		"exp": now + 30})
	f.set("tok-extra", map[string]any{"active": true, "username": "bob", "aud": []string{"mcpgate"}, "scope": "mcp"})
	f.set("tok-github", map[string]any{"active": true, "sub": "alice", "aud": github.Resource, "scope": "mcp"})
	f.set("tok-noaud", map[string]any{"active": true, "sub": "alice", "scope": "mcp"})
	f.set("tok-revoked", map[string]any{"active": false})
	f.set("tok-expired", map[string]any{"active": true, "sub": "alice", "aud": memory.Resource, "scope": "mcp", "exp": now - 120})
	f.set("tok-noscope", map[string]any{"active": true, "sub": "alice", "aud": memory.Resource})
	g := newGate(t, introspectionConfig(f), clk)

	p := wantOK(t, g.Authenticate(bearer("tok-alice"), memory), "alice")
	if p.Kind != KindToken || p.Issuer != "https://as.example.com" || !slices.Equal(p.Scopes, []string{"mcp", "tools"}) ||
		p.Claims["client_id"] != "claude" || !p.Expiry.Equal(clk.Now().Add(time.Hour)) {
		t.Errorf("principal %+v", p)
	}
	wantOK(t, g.Authenticate(bearer("tok-client"), memory), "claude")
	wantOK(t, g.Authenticate(bearer("tok-extra"), memory), "bob")
	wantRefused(t, g.Authenticate(bearer("tok-github"), memory), http.StatusUnauthorized,
		`its audience ["https://gw.example.com/servers/github/mcp"] does not include `+memory.Resource)
	wantRefused(t, g.Authenticate(bearer("tok-noaud"), memory), http.StatusUnauthorized, "names no audience")
	for _, tok := range []string{"tok-revoked", "tok-unknown"} {
		d := g.Authenticate(bearer(tok), memory)
		wantRefused(t, d, http.StatusUnauthorized, "invalid token: it is not active")
		if !strings.HasPrefix(d.Challenge, `Bearer error="invalid_token", resource_metadata="`+memory.Metadata+`", scope="mcp"`) {
			t.Errorf("challenge %q", d.Challenge)
		}
	}
	wantRefused(t, g.Authenticate(bearer("tok-expired"), memory), http.StatusUnauthorized, "expired at 2026-03-01T11:58:00Z")
	wantRefused(t, g.Authenticate(bearer("tok-noscope"), memory), http.StatusForbidden, "lacks mcp")

	// Cached: the same tokens again make no call.
	calls := f.count()
	for _, tok := range []string{"tok-alice", "tok-client", "tok-revoked", "tok-unknown"} {
		g.Authenticate(bearer(tok), memory)
	}
	wantOK(t, g.Authenticate(bearer("tok-github"), github), "alice") // cached, checked for another target
	if got := f.count(); got != calls {
		t.Fatalf("%d introspection calls for cached tokens", got-calls)
	}
	// tok-client expires in 30s: it is asked again then (and passes
	// within the leeway).
	clk.Advance(30 * time.Second)
	wantOK(t, g.Authenticate(bearer("tok-client"), memory), "claude")
	wantOK(t, g.Authenticate(bearer("tok-alice"), memory), "alice")
	if got := f.count(); got != calls+1 {
		t.Fatalf("%d introspection calls, want 1 (tok-client)", got-calls)
	}
	// After a minute everything is asked again: a revocation shows.
	f.set("tok-alice", map[string]any{"active": false})
	clk.Advance(30 * time.Second)
	wantRefused(t, g.Authenticate(bearer("tok-alice"), memory), http.StatusUnauthorized, "not active")
	if got := f.count(); got != calls+2 {
		t.Fatalf("%d introspection calls, want 2", got-calls)
	}
}

// TestIntrospectionKeysFirst: an API key is recognised before any
// introspection: a key is never sent to the authorization server.
func TestIntrospectionKeysFirst(t *testing.T) {
	f := newFakeIntrospection(t)
	g := newGate(t, introspectionConfig(f, APIKey{Name: "ci", SHA256: hashOf(ciKey)}), newClock())
	wantOK(t, g.Authenticate(bearer(ciKey), memory), "ci")
	if f.count() != 0 {
		t.Errorf("%d introspection calls for an API key", f.count())
	}
}

// TestIntrospectionFailure: an endpoint that fails (or refuses the
// gateway's credentials) gives 503, not cached.
func TestIntrospectionFailure(t *testing.T) {
	clk := newClock()
	f := newFakeIntrospection(t)
	f.set("tok", map[string]any{"active": true, "sub": "alice", "aud": memory.Resource, "scope": "mcp"})
	f.status = http.StatusBadGateway
	g := newGate(t, introspectionConfig(f), clk)
	d := g.Authenticate(bearer("tok"), memory)
	wantRefused(t, d, http.StatusServiceUnavailable, "introspection at "+f.srv.URL+" failed: answered 502 Bad Gateway")
	if d.Challenge != "" || d.RetryAfter <= 0 {
		t.Errorf("decision %+v", d)
	}
	f.mu.Lock()
	f.status = 0
	f.mu.Unlock()
	wantOK(t, g.Authenticate(bearer("tok"), memory), "alice")

	cfg := introspectionConfig(f)
	cfg.Issuers[0].Introspection.ClientSecret = "wrong"
	g = newGate(t, cfg, clk)
	wantRefused(t, g.Authenticate(bearer("tok"), memory), http.StatusServiceUnavailable,
		"answered 401 Unauthorized (check the introspection clientId and clientSecret)")
}

// TestIntrospectionConcurrent: requests with one token at once make one
// call.
func TestIntrospectionConcurrent(t *testing.T) {
	f := newFakeIntrospection(t)
	f.set("tok", map[string]any{"active": true, "sub": "alice", "aud": memory.Resource, "scope": "mcp"})
	f.gate = make(chan struct{})
	g := newGate(t, introspectionConfig(f), newClock())
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if d := g.Authenticate(bearer("tok"), memory); d.Status != 0 {
				t.Errorf("decision %+v", d)
			}
		})
	}
	<-f.entered // the first call is in; the others come meanwhile, or find it cached
	close(f.gate)
	wg.Wait()
	if f.count() != 1 {
		t.Errorf("%d introspection calls, want 1", f.count())
	}
}

// TestIntrospectionCacheBounded: the cache keeps the most recently used
// results, at most CacheSize.
func TestIntrospectionCacheBounded(t *testing.T) {
	f := newFakeIntrospection(t)
	for i := range 10 {
		f.set(fmt.Sprint("tok-", i), map[string]any{"active": true, "sub": "alice", "aud": memory.Resource, "scope": "mcp"})
	}
	g := newGate(t, introspectionConfig(f), newClock(), func(o *Options) { o.CacheSize = 4 })
	for i := range 10 {
		wantOK(t, g.Authenticate(bearer(fmt.Sprint("tok-", i)), memory), "alice")
	}
	if n := g.cache.len(); n != 4 {
		t.Fatalf("%d results cached, want 4", n)
	}
	calls := f.count()
	g.Authenticate(bearer("tok-9"), memory) // kept
	g.Authenticate(bearer("tok-0"), memory) // dropped
	if got := f.count() - calls; got != 1 {
		t.Errorf("%d calls, want 1", got)
	}
}

// TestOpaqueWithoutIntrospection: with issuers but no introspection, an
// opaque token is refused saying so.
func TestOpaqueWithoutIntrospection(t *testing.T) {
	g := newGate(t, oauthConfig(Issuer{Issuer: "https://as.example.com"}), newClock())
	wantRefused(t, g.Authenticate(bearer("opaque-token"), memory), http.StatusUnauthorized,
		"not a JWT, and no issuer has introspection")
}
