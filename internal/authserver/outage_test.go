package authserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// outage is a Store that, while down, fails every call the endpoints
// make with ErrUnavailable, as Redis stopped or a state file that
// cannot be written does.
type outage struct {
	Store
	down atomic.Bool
}

func (o *outage) fail() error {
	if o.down.Load() {
		return ErrUnavailable
	}
	return nil
}

func (o *outage) Client(ctx context.Context, id string) (*Client, error) {
	if err := o.fail(); err != nil {
		return nil, err
	}
	return o.Store.Client(ctx, id)
}

func (o *outage) Clients(ctx context.Context) ([]*Client, error) {
	if err := o.fail(); err != nil {
		return nil, err
	}
	return o.Store.Clients(ctx)
}

func (o *outage) PutAuthRequest(ctx context.Context, r *AuthRequest, ttl time.Duration) error {
	if err := o.fail(); err != nil {
		return err
	}
	return o.Store.PutAuthRequest(ctx, r, ttl)
}

func (o *outage) TakeCode(ctx context.Context, code Hash) (string, error) {
	if err := o.fail(); err != nil {
		return "", err
	}
	return o.Store.TakeCode(ctx, code)
}

func (o *outage) RefreshGrant(ctx context.Context, h Hash) (*Grant, error) {
	if err := o.fail(); err != nil {
		return nil, err
	}
	return o.Store.RefreshGrant(ctx, h)
}

// TestStoreOutageIsTemporary: while the Store is out of reach, every
// endpoint that needs it says so (503, temporarily_unavailable, a
// Retry-After), never that the client is unknown (a client told
// invalid_client, or a "not registered" page, may drop its
// registration) nor that its code or refresh token is bad (it would
// drop a token that still works). Once the Store is back, the same
// client, code and refresh token work.
func TestStoreOutageIsTemporary(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC))
	st := &outage{Store: newMemStore(clk.Now, 10*time.Minute)}
	w := newWorld(t, nil, st, clk)
	_, refresh := w.tokens()
	code := w.code(authorizeParams())

	st.down.Store(true)
	if rec := w.authorize(authorizeParams()); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("authorize while the Store is down: %d (Retry-After %q) %s; want 503 with Retry-After",
			rec.Code, rec.Header().Get("Retry-After"), strings.TrimSpace(rec.Body.String()))
	}
	unavailable := func(what string, status int, body map[string]any) {
		t.Helper()
		if status != http.StatusServiceUnavailable || body["error"] != errUnavailable {
			t.Errorf("%s while the Store is down: %d %v; want 503 %s", what, status, body, errUnavailable)
		}
	}
	status, body := w.redeem(code)
	unavailable("redeeming a code", status, body)
	status, body = w.refresh(refresh, nil)
	unavailable("a refresh", status, body)
	status, body = w.post("/oauth/revoke", url.Values{"token": {refresh}, "client_id": {appID}}, nil)
	unavailable("a revocation", status, body)
	r := httptest.NewRequest(http.MethodPost, issuer+"/oauth/register",
		strings.NewReader(`{"client_name":"while-down","redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"none"}`))
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	w.s.Handler().ServeHTTP(rec, r)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), errUnavailable) || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a registration while the Store is down: %d (Retry-After %q) %s; want 503 %s",
			rec.Code, rec.Header().Get("Retry-After"), strings.TrimSpace(rec.Body.String()), errUnavailable)
	}

	st.down.Store(false)
	if status, body := w.redeem(code); status != http.StatusOK {
		t.Errorf("the code once the Store is back: %d %v", status, body)
	}
	if status, body := w.refresh(refresh, nil); status != http.StatusOK {
		t.Errorf("the refresh token once the Store is back: %d %v", status, body)
	}
}

// TestAuthorizePageHeaders: the page /authorize shows when it cannot
// send the user agent back (an unknown client, a redirect URI not
// registered) carries the login pages' security headers: it names the
// request in its URL, so no Referer, and no framing.
func TestAuthorizePageHeaders(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	q := authorizeParams()
	q.Set("redirect_uri", "https://evil.example/cb")
	rec := w.authorize(q)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("authorize with a redirect URI not registered: %d, want 400", rec.Code)
	}
	for header, want := range map[string]string{"X-Frame-Options": "DENY", "Cache-Control": "no-store",
		"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
		if got := rec.Header().Get(header); got != want {
			t.Errorf("%s %q, want %q", header, got, want)
		}
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q, want frame-ancestors 'none'", csp)
	}
}
