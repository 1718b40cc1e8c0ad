package authserver

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alexedwards/argon2id"
	"golang.org/x/crypto/bcrypt"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// What the login tests share: a Server whose provider ends are recorded
// (the provider is another part), a client and a request in its store,
// and a browser-like client driving the forms over httptest.

// cheap is argon2id made fast for tests: verification cost follows the
// hash, so tests hash with little memory.
var cheap = &argon2id.Params{Memory: 1024, Iterations: 1, Parallelism: 1, SaltLength: 16, KeyLength: 32}

func argonHash(t testing.TB, pw string) string {
	t.Helper()
	h, err := argon2id.CreateHash(pw, cheap)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func bcryptHash(t testing.TB, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// ended records the provider ends the login pages called.
type ended struct {
	mu       sync.Mutex
	finished []*AuthRequest
	refused  []string // "code: description"
}

// loginFixture is a Server with one client and one pending request.
type loginFixture struct {
	s     *Server
	l     *loginPages
	clock *testkit.Clock
	log   *testkit.SyncBuffer
	ended *ended
	req   *AuthRequest
}

const (
	loginClientName = "Claude"
	loginRedirect   = "https://claude.ai/api/mcp/auth_callback"
	loginResource   = "https://gw.example.com/servers/memory/mcp"
)

// newLoginFixture builds a server at issuer (default
// http://127.0.0.1:8080) with users alice (argon2id, "correct horse")
// and bob (bcrypt, "battery staple"), unless edit changes cfg.
func newLoginFixture(t testing.TB, issuer string, edit func(*config.AuthServer)) *loginFixture {
	t.Helper()
	if issuer == "" {
		issuer = "http://127.0.0.1:8080"
	}
	cfg := config.NewAuthServer()
	cfg.Issuer = issuer
	cfg.Scopes = []string{"mcp"}
	cfg.Users = []config.AuthUser{
		{Name: "alice", PasswordHash: argonHash(t, "correct horse")},
		{Name: "bob", PasswordHash: bcryptHash(t, "battery staple")},
		{Name: "carol"}, // passkeys only
	}
	if edit != nil {
		edit(cfg)
	}
	f := &loginFixture{clock: testkit.NewClock(time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)), log: &testkit.SyncBuffer{}, ended: &ended{}}
	s, err := New(*cfg, Deps{
		Logger: slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:    f.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.s, f.l = s, s.login
	f.l.finish = func(w http.ResponseWriter, r *http.Request, req *AuthRequest) {
		f.ended.mu.Lock()
		f.ended.finished = append(f.ended.finished, req)
		f.ended.mu.Unlock()
		http.Redirect(w, r, req.RedirectURI+"?code=test&state="+url.QueryEscape(req.State), http.StatusSeeOther)
	}
	f.l.refuse = func(w http.ResponseWriter, r *http.Request, req *AuthRequest, code, description string) {
		f.ended.mu.Lock()
		f.ended.refused = append(f.ended.refused, code+": "+description)
		f.ended.mu.Unlock()
		http.Redirect(w, r, req.RedirectURI+"?error="+code, http.StatusSeeOther)
	}
	ctx := context.Background()
	if err := s.store.PutClient(ctx, &Client{
		ID: "client-1", Name: loginClientName, URI: "https://claude.ai/", RedirectURIs: []string{loginRedirect},
		AuthMethod: "none", CreatedAt: f.clock.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	f.req = f.newRequest(t)
	return f
}

// newRequest stores a fresh request, as /authorize would.
func (f *loginFixture) newRequest(t testing.TB) *AuthRequest {
	t.Helper()
	req := &AuthRequest{
		ID:       "req-" + rand.Text(),
		ClientID: "client-1", RedirectURI: loginRedirect, State: "st", Scopes: []string{"mcp"},
		ResponseType: "code", CodeChallenge: "x", CodeChallengeMethod: "S256", Resource: loginResource,
		CreatedAt: f.clock.Now(), CSRF: rand.Text(),
	}
	if err := f.s.store.PutAuthRequest(context.Background(), req, loginRequestLife); err != nil {
		t.Fatal(err)
	}
	return req
}

// do sends r to the server and returns the recorded answer.
func (f *loginFixture) do(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, r)
	return w
}

// post is a same-origin form POST to path (issuer-relative, with the
// request's id), with cookies.
func (f *loginFixture) post(path string, form url.Values, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	r := newFormRequest(f, path, form)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return f.do(r)
}

// newFormRequest is a same-origin form POST from 192.0.2.10.
func newFormRequest(f *loginFixture, path string, form url.Values) *http.Request {
	r := httptest.NewRequest(http.MethodPost, f.l.origin+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", f.l.origin)
	r.RemoteAddr = "192.0.2.10:5555"
	return r
}

// cookieRequest is a request carrying cookie c.
func cookieRequest(c *http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(c)
	return r
}

func (f *loginFixture) get(path string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, f.l.origin+path, nil)
	r.RemoteAddr = "192.0.2.10:5555"
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return f.do(r)
}

// signIn signs user in with password for req and returns the cookie.
func (f *loginFixture) signIn(t testing.TB, req *AuthRequest, user, password string) *http.Cookie {
	t.Helper()
	w := f.post(f.l.url("/oauth/login", req.ID), url.Values{"csrf": {req.CSRF}, "username": {user}, "password": {password}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != f.l.url("/oauth/consent", req.ID) {
		t.Fatalf("sign-in of %s: %d, Location %q\n%s", user, w.Code, w.Header().Get("Location"), w.Body.String())
	}
	return loginCookie(t, w, f.l.cookie)
}

// loginCookie returns the sign-in cookie a response set.
func loginCookie(t testing.TB, w *httptest.ResponseRecorder, name string) *http.Cookie {
	t.Helper()
	for _, c := range w.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s cookie set: %v", name, w.Header().Values("Set-Cookie"))
	return nil
}

// checkPageHeaders asserts the headers every login page answer carries.
func checkPageHeaders(t testing.TB, what string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", what, csp, want)
		}
	}
	for k, v := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

// registerPasskey stores a placeholder passkey of user (not one any
// authenticator holds), so that the sign-in page offers passkeys.
func (f *loginFixture) registerPasskey(t testing.TB, user string) {
	t.Helper()
	if err := f.s.store.PutPasskey(context.Background(), &Passkey{User: user, ID: []byte("placeholder"), Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
}
