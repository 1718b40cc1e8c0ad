package authserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRegisterRateLimitBehindProxy: behind a trusted proxy (Traefik, the
// usual home setup) every registration comes from the proxy's address.
// One stranger registering in a loop must spend their own bucket, not
// everyone's: another client address (X-Forwarded-For, trusted) still
// registers.
func TestRegisterRateLimitBehindProxy(t *testing.T) {
	clock := newClientsClock()
	s, err := New(*clientsConfig(), Deps{Now: clock.Now, TrustProxyHeaders: true})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`
	post := func(forwardedFor string) int {
		r := httptest.NewRequest(http.MethodPost, "/oauth/register", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Forwarded-For", forwardedFor)
		r.RemoteAddr = "10.0.0.2:40000" // the proxy
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w.Code
	}
	for i := range registerBurst {
		if code := post("203.0.113.7"); code != http.StatusCreated {
			t.Fatalf("registration %d: %d", i, code)
		}
	}
	if code := post("203.0.113.7"); code != http.StatusTooManyRequests {
		t.Fatalf("the stranger past the burst: %d, want 429", code)
	}
	if code := post("198.51.100.9"); code != http.StatusCreated {
		t.Fatalf("another client behind the same proxy: %d, want 201", code)
	}
}
