package authserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// TestSignInPageFollowsTheFormContract: the sign-in page's form posts
// to {issuer path}/oauth/login?request=ID with the request's csrf and
// the fields username and password (and, while the one-time code is
// good, a form with code), as the provider's and peers' tests post them.
func TestSignInPageFollowsTheFormContract(t *testing.T) {
	f := newLoginFixture(t, "https://gw.example.com/auth", func(c *config.AuthServer) { c.SignInCode = true })
	f.registerPasskey(t, "carol")
	w := f.get("/auth/oauth/login?request=" + f.req.ID)
	if w.Code != http.StatusOK {
		t.Fatalf("GET sign-in: %d\n%s", w.Code, w.Body)
	}
	checkPageHeaders(t, "sign-in page", w.Header())
	body := w.Body.String()
	for _, want := range []string{
		`<form method="post" action="/auth/oauth/login?request=` + f.req.ID + `">`,
		`<input type="hidden" name="csrf" value="` + f.req.CSRF + `">`,
		`name="username"`, `name="password"`, `name="code"`,
		`<label for="username">`, `<label for="password">`, `<label for="code">`,
		`<meta name="viewport" content="width=device-width, initial-scale=1">`,
		loginClientName, "the memory server",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("sign-in page lacks %q", want)
		}
	}
	// Passkeys are on (a domain issuer) and someone has one: the page's
	// one script runs by its hash, and nothing else may.
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(body, "<script>") || !strings.Contains(csp, "script-src "+f.l.pages.scriptHash) {
		t.Errorf("passkey script or its CSP hash missing: CSP %q", csp)
	}
}

// TestSignInWithPasswords: argon2id and bcrypt users sign in (303 to
// the consent page, a sign-in cookie set HttpOnly and SameSite=Lax);
// a wrong password, an unknown user and a passkey-only user get the page
// again with an error and no cookie, and the failure is logged without
// the password.
func TestSignInWithPasswords(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	for _, u := range []struct{ name, pw string }{{"alice", "correct horse"}, {"bob", "battery staple"}} {
		c := f.signIn(t, f.req, u.name, u.pw)
		if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure {
			t.Errorf("%s: cookie %+v: want HttpOnly, SameSite=Lax, Path=/, not Secure on an http loopback issuer", u.name, c)
		}
	}
	for _, u := range []struct{ name, pw string }{
		{"alice", "wrong horse"}, {"mallory", "correct horse"}, {"carol", ""}, {"carol", "anything"}, {"bob", "correct horse"},
	} {
		w := f.post(f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "username": {u.name}, "password": {u.pw}})
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Wrong user name or password.") {
			t.Errorf("%s/%q: %d, want 200 with the error\n%s", u.name, u.pw, w.Code, w.Body)
		}
		if len(w.Result().Cookies()) != 0 {
			t.Errorf("%s/%q: a cookie was set: %v", u.name, u.pw, w.Result().Cookies())
		}
	}
	logs := f.log.String()
	if n := strings.Count(logs, "sign-in failed"); n != 5 {
		t.Errorf("%d failures logged, want 5:\n%s", n, logs)
	}
	for _, secret := range []string{"wrong horse", "correct horse", "battery staple", "mallory"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
}

// TestSecureCookieOnHTTPS: on an https issuer the cookie is
// __Host-mcpgate-login, Secure, with no Domain.
func TestSecureCookieOnHTTPS(t *testing.T) {
	f := newLoginFixture(t, "https://gw.example.com", nil)
	c := f.signIn(t, f.req, "alice", "correct horse")
	if c.Name != "__Host-mcpgate-login" || !c.Secure || c.Domain != "" || c.Path != "/" {
		t.Errorf("cookie %+v", c)
	}
}

// TestUnknownUserCostsOneComparison: every password check compares one
// hash, whether the user exists, has no password, or the password is
// wrong: the time of a refusal does not tell which names exist.
func TestUnknownUserCostsOneComparison(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	var n int
	f.l.passwords.compared = func() { n++ }
	for _, name := range []string{"alice", "mallory", "carol", ""} {
		n = 0
		f.post(f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "username": {name}, "password": {"guess"}})
		if n != 1 {
			t.Errorf("user %q: %d hash comparisons, want 1", name, n)
		}
	}
	if hashKind(f.l.passwords.dummy) != "argon2id" {
		t.Errorf("dummy hash %q: want one made like the first user's (argon2id)", f.l.passwords.dummy)
	}
}

// TestSignInCode: the one-time code is logged once at New, signs in the
// owner (no users configured) once, and is refused after: the page stops
// offering it.
func TestSignInCode(t *testing.T) {
	f := newLoginFixture(t, "", func(c *config.AuthServer) { c.Users = nil; c.SignInCode = true })
	m := regexp.MustCompile(`one-time sign-in code[^:]*: ([0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4})`).FindStringSubmatch(f.log.String())
	if m == nil || strings.Count(f.log.String(), m[1]) != 1 {
		t.Fatalf("the code is not in the log once:\n%s", f.log.String())
	}
	code := m[1]
	if page := f.get(f.l.url("/oauth/login", f.req.ID)).Body.String(); strings.Contains(page, `name="password"`) || !strings.Contains(page, `name="code"`) {
		t.Errorf("no users: the page should offer the code and no password form")
	}
	w := f.post(f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "code": {"0000-0000-0000-0000"}})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "That code is wrong") {
		t.Fatalf("wrong code: %d\n%s", w.Code, w.Body)
	}
	// Typed in lower case without dashes, as people do.
	typed := strings.ToLower(strings.ReplaceAll(code, "-", " "))
	w = f.post(f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "code": {typed}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("the code: %d\n%s", w.Code, w.Body)
	}
	c := loginCookie(t, w, f.l.cookie)
	if user, _, ok := f.l.signedIn(cookieRequest(c)); !ok || user != ownerUser {
		t.Errorf("the code signed in %q (%v), want %q", user, ok, ownerUser)
	}
	w = f.post(f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "code": {code}})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "already used") {
		t.Errorf("the code reused: %d, want the page with an error\n%s", w.Code, w.Body)
	}
	if page := f.get(f.l.url("/oauth/login", f.req.ID)).Body.String(); strings.Contains(page, `name="code"`) {
		t.Errorf("the page still offers the used code")
	}
}

// TestSignInCodeWithUsers: with users configured, the code signs in the
// one named, or the first.
func TestSignInCodeWithUsers(t *testing.T) {
	f := newLoginFixture(t, "", func(c *config.AuthServer) { c.SignInCode = true })
	code := regexp.MustCompile(`[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}`).FindString(f.log.String())
	w := f.post(f.l.url("/oauth/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "code": {code}, "username": {"carol"}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("code for carol: %d\n%s", w.Code, w.Body)
	}
	if user, _, _ := f.l.signedIn(cookieRequest(loginCookie(t, w, f.l.cookie))); user != "carol" {
		t.Errorf("signed in %q, want carol", user)
	}
}

// TestCrossSiteFormsRefused: a POST without the request's csrf token,
// with another request's, from another origin, or with neither Origin
// nor Referer, is refused with a 403 page and logged; Referer of the
// issuer's origin stands in for a missing Origin.
func TestCrossSiteFormsRefused(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	other := f.newRequest(t)
	good := url.Values{"csrf": {f.req.CSRF}, "username": {"alice"}, "password": {"correct horse"}}
	cases := []struct {
		name    string
		form    url.Values
		headers map[string]string
		want    int
	}{
		{"missing csrf", url.Values{"username": {"alice"}, "password": {"correct horse"}}, nil, http.StatusForbidden},
		{"wrong csrf", url.Values{"csrf": {"nope"}, "username": {"alice"}, "password": {"correct horse"}}, nil, http.StatusForbidden},
		{"another request's csrf", url.Values{"csrf": {other.CSRF}, "username": {"alice"}, "password": {"correct horse"}}, nil, http.StatusForbidden},
		{"other origin", good, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"null origin", good, map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"null origin from another site", good, map[string]string{"Origin": "null", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"no origin, no referer", good, map[string]string{"Origin": ""}, http.StatusForbidden},
		{"no origin, other referer", good, map[string]string{"Origin": "", "Referer": "https://evil.example/x"}, http.StatusForbidden},
		{"no origin, own referer", good, map[string]string{"Origin": "", "Referer": f.l.origin + "/oauth/login"}, http.StatusSeeOther},
		// What Chromium sends from a no-referrer page of the same origin.
		{"null origin from a same-origin no-referrer page", good, map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
	}
	for _, tc := range cases {
		for _, path := range []string{"/oauth/login", "/oauth/consent"} {
			r := newFormRequest(f, f.l.url(path, f.req.ID), tc.form)
			for k, v := range tc.headers {
				if v == "" {
					r.Header.Del(k)
				} else {
					r.Header.Set(k, v)
				}
			}
			w := f.do(r)
			// (The consent POST that passes is not signed in: 303 back to
			// the sign-in page.)
			if w.Code != tc.want {
				t.Errorf("%s %s: %d, want %d\n%s", tc.name, path, w.Code, tc.want, w.Body)
			}
			checkPageHeaders(t, tc.name, w.Header())
		}
	}
	if n := strings.Count(f.log.String(), "form refused"); n != 2*(len(cases)-2) {
		t.Errorf("%d refusals logged, want %d", n, 2*(len(cases)-2))
	}
	if len(f.ended.finished)+len(f.ended.refused) != 0 {
		t.Errorf("a forged form reached the provider: %+v", f.ended)
	}
}

// TestExpiredRequest: a page of an unknown or expired request is a 400
// page saying to connect again.
func TestExpiredRequest(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	f.clock.Advance(loginRequestLife + time.Second)
	for _, path := range []string{f.l.url("/oauth/login", f.req.ID), f.l.url("/oauth/consent", "nope"), "/oauth/login"} {
		w := f.get(path)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "connect again") {
			t.Errorf("GET %s: %d\n%s", path, w.Code, w.Body)
		}
		checkPageHeaders(t, path, w.Header())
	}
}

// TestStart: /authorize's hand-over goes to the sign-in page, or with a
// sign-in cookie straight to the consent page.
func TestStart(t *testing.T) {
	f := newLoginFixture(t, "https://gw.example.com/auth", nil)
	start := func(c *http.Cookie) string {
		r := httptest.NewRequest(http.MethodGet, f.s.cfg.Issuer+"/oauth/authorize", nil)
		if c != nil {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		f.l.start(w, r, f.req)
		if w.Code != http.StatusSeeOther {
			t.Fatalf("start: %d", w.Code)
		}
		checkPageHeaders(t, "start", w.Header())
		return w.Header().Get("Location")
	}
	if got, want := start(nil), "/auth/oauth/login?request="+f.req.ID; got != want {
		t.Errorf("not signed in: Location %q, want %q", got, want)
	}
	c := f.signIn(t, f.req, "alice", "correct horse")
	if got, want := start(c), "/auth/oauth/consent?request="+f.req.ID; got != want {
		t.Errorf("signed in: Location %q, want %q", got, want)
	}
}
