package admin

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "admin-token-0123456789"

// fakeSource is a Source with canned answers; it counts Tools calls.
type fakeSource struct {
	servers  []Server
	sessions []Session
	endErr   error
	auth     auth.Authenticator
	asks     atomic.Int32
	release  chan struct{} // Tools waits for it when set
	cluster  *Cluster
	ended    string // the id EndSession was last given
}

func (f *fakeSource) Servers() []Server { return append([]Server(nil), f.servers...) }
func (f *fakeSource) Tools(ctx context.Context, server string) ([]string, error) {
	f.asks.Add(1)
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return []string{"echo", "<b>bold</b>"}, nil
}
func (f *fakeSource) Sessions(time.Time) []Session { return f.sessions }
func (f *fakeSource) EndSession(_ *http.Request, id string) (Session, error) {
	f.ended = id
	if f.endErr != nil {
		return Session{}, f.endErr
	}
	return Session{ID: id}, nil
}
func (f *fakeSource) Restart(server, reason string) error {
	if server == "iso" {
		return ErrNoProcess
	}
	if server != "shared" {
		return ErrNotFound
	}
	return nil
}
func (f *fakeSource) RequestsTotal() uint64             { return 42 }
func (f *fakeSource) Authenticator() auth.Authenticator { return f.auth }
func (f *fakeSource) Cluster() *Cluster                 { return f.cluster }

// scopeAuth: "Bearer NAME" is a token principal whose scopes are
// scopes[NAME]; "Bearer down" cannot be checked now (503).
type scopeAuth struct{ scopes map[string][]string }

func (a scopeAuth) Authenticate(r *http.Request, t auth.Target) auth.Decision {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "down" {
		return auth.Decision{Status: http.StatusServiceUnavailable, Reason: "issuer unreachable"}
	}
	if t.Kind != "admin" {
		return auth.Decision{Status: http.StatusBadRequest}
	}
	if s, ok := a.scopes[tok]; ok {
		return auth.Decision{Principal: &auth.Principal{Name: tok, Kind: auth.KindToken, Scopes: s}}
	}
	return auth.Decision{Status: http.StatusUnauthorized, Reason: "unknown token"}
}
func (a scopeAuth) Metadata(auth.Target) ([]byte, bool) { return nil, false }

func do(t *testing.T, h http.Handler, method, path, bearer string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestAuthorize(t *testing.T) {
	src := &fakeSource{auth: scopeAuth{scopes: map[string][]string{"alice": {"admin"}, "bob": {"mcp"}}}}
	h := New(Config{Source: src, Token: token})
	for _, c := range []struct {
		bearer string
		want   int
	}{
		{"", http.StatusUnauthorized},
		{"wrong", http.StatusUnauthorized},
		{token, http.StatusOK},
		{"alice", http.StatusOK},
		{"bob", http.StatusForbidden},
		{"down", http.StatusServiceUnavailable},
	} {
		w := do(t, h, "GET", "/admin/summary", c.bearer)
		if w.Code != c.want {
			t.Errorf("bearer %q: %d %s, want %d", c.bearer, w.Code, w.Body, c.want)
		}
		if c.want == http.StatusUnauthorized && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("bearer %q: 401 without a Bearer challenge", c.bearer)
		}
		if strings.Contains(w.Body.String(), token) {
			t.Errorf("bearer %q: the token is in the answer", c.bearer)
		}
	}
	// Without an Authenticator only the token opens.
	h = New(Config{Source: &fakeSource{}, Token: token})
	if w := do(t, h, "GET", "/admin/summary", "alice"); w.Code != http.StatusUnauthorized {
		t.Errorf("a principal without an Authenticator: %d", w.Code)
	}
	if w := do(t, h, "GET", "/admin/summary", token, "Origin", "https://evil.example"); w.Code != http.StatusForbidden {
		t.Errorf("another site's Origin: %d", w.Code)
	}
	if w := do(t, h, "GET", "/admin/summary", token, "Origin", "http://example.com"); w.Code != http.StatusOK {
		t.Errorf("the gateway's own Origin: %d", w.Code) // httptest's Host is example.com
	}
	if w := do(t, h, "GET", "/admin/summary", "", "Cookie", cookieName+"="+token); w.Code != http.StatusOK {
		t.Errorf("the cookie: %d", w.Code)
	}
}

func TestEndpoints(t *testing.T) {
	src := &fakeSource{servers: []Server{{Name: "shared", Ready: true, PID: 7}, {Name: "iso", Ready: true, State: "per session"}}}
	h := New(Config{Source: src, Token: token, Version: "v1"})
	var sum Summary
	if w := do(t, h, "GET", "/admin/summary", token); w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &sum) != nil ||
		sum.RequestsTotal != 42 || sum.Servers != 2 || sum.ServersReady != 2 || sum.Version != "v1" {
		t.Errorf("summary: %d %s", w.Code, w.Body)
	}
	var sv struct{ Servers []Server }
	if w := do(t, h, "GET", "/admin/servers", token); w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &sv) != nil {
		t.Fatalf("servers: %d %s", w.Code, w.Body)
	}
	if len(sv.Servers) != 2 || sv.Servers[0].Name != "iso" || sv.Servers[0].Tools != nil ||
		strings.Join(sv.Servers[1].Tools, ",") != "echo,<b>bold</b>" || sv.Servers[1].Stderr == nil {
		t.Errorf("servers: %+v", sv)
	}
	for _, c := range []struct {
		method, path string
		endErr       error
		want         int
	}{
		{"POST", "/admin/servers/shared/restart", nil, http.StatusAccepted},
		{"POST", "/admin/servers/iso/restart", nil, http.StatusConflict},
		{"POST", "/admin/servers/nope/restart", nil, http.StatusNotFound},
		{"GET", "/admin/servers/shared/restart", nil, http.StatusNotFound},
		{"DELETE", "/admin/sessions/abcdefgh", nil, http.StatusOK},
		{"DELETE", "/admin/sessions/abcd", ErrAmbiguous, http.StatusConflict},
		{"DELETE", "/admin/sessions/zzzz", ErrNotFound, http.StatusNotFound},
		{"GET", "/admin/nothing", nil, http.StatusNotFound},
	} {
		src.endErr = c.endErr
		if w := do(t, h, c.method, c.path, token); w.Code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, w.Code, w.Body, c.want)
		}
	}
}

// TestToolsAskedOncePerProcess: concurrent polls share one ask; the
// answer is reused for the same process, asked again for a new one.
func TestToolsAskedOncePerProcess(t *testing.T) {
	src := &fakeSource{release: make(chan struct{})}
	h := New(Config{Source: src, Token: token})
	var wg sync.WaitGroup
	got := make([][]string, 5)
	for i := range got {
		wg.Go(func() { got[i], _ = h.toolsOf(context.Background(), "shared", 7) })
	}
	testkit.WaitFor(t, "the first ask to begin (the rest then wait for it)", func() bool { return src.asks.Load() != 0 })
	close(src.release)
	wg.Wait()
	for i := range got {
		if len(got[i]) != 2 {
			t.Errorf("poll %d: %q", i, got[i])
		}
	}
	h.toolsOf(context.Background(), "shared", 7)
	if n := src.asks.Load(); n != 1 {
		t.Errorf("%d asks for one process, want 1", n)
	}
	h.toolsOf(context.Background(), "shared", 8)
	if n := src.asks.Load(); n != 2 {
		t.Errorf("%d asks after a new process, want 2", n)
	}
}

// TestStatusCSPMatchesScript: the CSP's hashes are those of the page's
// inline script and style, and nothing else inline is allowed.
func TestStatusCSPMatchesScript(t *testing.T) {
	h := New(Config{Source: &fakeSource{}, Token: token})
	w := do(t, h, "GET", "/status", token)
	if w.Code != 200 {
		t.Fatalf("/status: %d", w.Code)
	}
	csp := w.Header().Get("Content-Security-Policy")
	for _, tag := range []string{"script", "style"} {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(w.Body.String(), -1)
		if len(m) != 1 {
			t.Fatalf("%d inline %s elements, want 1", len(m), tag)
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		if want := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, tag+"-src "+map[string]string{"script": "'self' ", "style": ""}[tag]+want) {
			t.Errorf("CSP %q lacks %s %s", csp, tag, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(w.Body.String(), "innerHTML") {
		t.Errorf("unsafe CSP or innerHTML in the page")
	}
	if w := do(t, h, "PUT", "/status", token); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("PUT /status: %d", w.Code)
	}
	if w := do(t, h, "POST", "/status", "", "Origin", "https://evil.example"); w.Code != http.StatusForbidden {
		t.Errorf("a login posted from another site: %d", w.Code)
	}
}
