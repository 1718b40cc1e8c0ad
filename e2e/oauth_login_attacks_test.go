package e2e

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The attacks on the built-in authorization server's pages (issue 21): cross-site request
// forgery of the consent and sign-in forms, password guessing, framing. Each with a control.

// consentPage walks c's authorization of resource up to the consent page, signed in as e2eUser.
func consentPage(t *testing.T, ua *userAgent, c oauthClient, resource string) page {
	t.Helper()
	_, challenge := newPKCE()
	login := ua.open(t, c.authorizeURL(resource, challenge, nil), c.meta.Issuer)
	signedIn := ua.signIn(t, login, e2eUser, e2ePassword, c.meta.Issuer)
	if signedIn.status != http.StatusSeeOther || signedIn.location == nil {
		t.Fatalf("sign-in: %d, want 303 to the consent page: %s", signedIn.status, brief(signedIn.body))
	}
	consent := ua.open(t, signedIn.location.String(), c.meta.Issuer)
	if consent.status != http.StatusOK {
		t.Fatalf("consent page: %d: %s", consent.status, brief(consent.body))
	}
	return consent
}

// refusedForm fails unless r is a refusal: a 4xx page, and no redirect carrying a code.
func refusedForm(t *testing.T, what string, r page) {
	t.Helper()
	if r.status < 400 || r.status >= 500 || (r.location != nil && r.location.Query().Has("code")) {
		t.Errorf("%s: %d (Location %v), want a 4xx refusal and no code: %s", what, r.status, r.location, brief(r.body))
	}
}

// TestOAuthServerConsentCSRF: the consent form takes effect only with its request's CSRF token
// and from the issuer's own origin. A forged post (no token, a wrong one, the attacker's own
// request's token, another Origin, Origin "null", no Origin nor Referer) is refused and issues no code; the
// real one then still works. The sign-in form is held to the same.
func TestOAuthServerConsentCSRF(t *testing.T) {
	g := startAuthGateway(t, nil)
	c := publicClient(t, g.meta, loopbackRedirect)
	resource := g.resource("everything")

	victim := newUserAgent(t)
	consent := consentPage(t, victim, c, resource)
	f := consent.form(t, "/oauth/consent")
	// The attacker's own authorization, to the consent page, gives it a valid CSRF token of
	// another request.
	attackerForm := consentPage(t, newUserAgent(t), c, resource).form(t, "/oauth/consent")
	if attackerForm.csrf == f.csrf {
		t.Fatal("two authorization requests share a CSRF token")
	}

	for _, tc := range []struct {
		name   string
		form   url.Values
		origin string
	}{
		{"no token", url.Values{"decision": {"allow"}}, g.base},
		{"wrong token", url.Values{"decision": {"allow"}, "csrf": {f.csrf + "x"}}, g.base},
		{"another request's token", url.Values{"decision": {"allow"}, "csrf": {attackerForm.csrf}}, g.base},
		{"another origin", url.Values{"decision": {"allow"}, "csrf": {f.csrf}}, "https://evil.example"},
		{"look-alike origin", url.Values{"decision": {"allow"}, "csrf": {f.csrf}}, g.base + ".evil.example"},
		{"no origin nor referer", url.Values{"decision": {"allow"}, "csrf": {f.csrf}}, ""},
		// A sandboxed frame posts with Origin "null"; without Sec-Fetch-Site: same-origin
		// (which only a browser writes, and only for the page's own posts) it is foreign.
		{"null origin", url.Values{"decision": {"allow"}, "csrf": {f.csrf}}, "null"},
	} {
		refusedForm(t, "consent with "+tc.name, victim.post(t, f.action, tc.form, tc.origin))
	}

	// The sign-in form: a fresh request, a wrong token, the right password.
	_, challenge := newPKCE()
	login := newUserAgent(t).open(t, c.authorizeURL(resource, challenge, nil), g.base)
	lf := login.form(t, "/oauth/login")
	for name, origin := range map[string]string{"wrong token": g.base, "another origin": "https://evil.example"} {
		csrf := lf.csrf
		if name == "wrong token" {
			csrf += "x"
		}
		refusedForm(t, "sign-in with "+name,
			newUserAgent(t).post(t, lf.action, url.Values{"csrf": {csrf}, "username": {e2eUser}, "password": {e2ePassword}}, origin))
	}

	// Control: the victim's real decision still goes through, once.
	to := victim.decide(t, consent, "allow", g.base)
	if to.Query().Get("code") == "" {
		t.Fatalf("the real consent: redirect %s without a code", to)
	}
}

// TestOAuthServerBruteForce: wrong passwords for one user are limited: within a few dozen tries
// the sign-in page answers 429, and from then on the right password is refused too (until the
// window passes), from a new browser as well, and so is another user's from the same address.
// Every try before is refused without a redirect. The guesser waits out each Retry-After, as a
// patient one would, until the window has grown long (minWindow): the checks after it then fall
// inside it however busy the machine is.
func TestOAuthServerBruteForce(t *testing.T) {
	const minWindow = 8 // seconds
	const bob, bobPassword = "bob", "bob's own long password"
	g := startAuthGateway(t, map[string]any{"users": []any{
		map[string]any{"name": e2eUser, "passwordHash": passwordHash(t, e2ePassword)},
		map[string]any{"name": bob, "passwordHash": passwordHash(t, bobPassword)},
	}})
	c := publicClient(t, g.meta, loopbackRedirect)
	_, challenge := newPKCE()
	ua := newUserAgent(t)
	p := ua.open(t, c.authorizeURL(g.resource("everything"), challenge, nil), g.base)
	f := p.form(t, "/oauth/login")

	const maxTries = 50
	throttled, window := 0, 0
	for i := 1; i <= maxTries; i++ {
		r := ua.post(t, f.action, url.Values{"csrf": {f.csrf}, "username": {e2eUser}, "password": {"guess-" + url.QueryEscape(string(rune('a'+i%26)))}}, g.base)
		if r.status == http.StatusTooManyRequests {
			secs, err := strconv.Atoi(r.header.Get("Retry-After"))
			if err != nil || secs < 1 {
				t.Fatalf("guess %d: 429 with Retry-After %q, want whole seconds", i, r.header.Get("Retry-After"))
			}
			if throttled == 0 {
				throttled = i
			}
			if window = secs; window >= minWindow {
				break
			}
			time.Sleep(time.Duration(secs) * time.Second) // the wait the gateway asked for
			continue
		}
		if r.status == http.StatusSeeOther || r.location != nil {
			t.Fatalf("wrong password %d: %d (Location %v): signed in", i, r.status, r.location)
		}
		if action, csrf, ok := scrapeForm(r.body, "/oauth/login"); ok { // the page again, maybe with a new token
			u, _ := r.url.Parse(action)
			f = htmlForm{action: u.String(), csrf: csrf}
		}
	}
	if throttled == 0 {
		t.Fatalf("%d wrong passwords in a row and no 429", maxTries)
	}
	if window < minWindow {
		t.Fatalf("%d tries and the window is still %d s", maxTries, window)
	}
	t.Logf("throttled after %d wrong passwords; the window grew to %d s", throttled, window)

	r := ua.post(t, f.action, url.Values{"csrf": {f.csrf}, "username": {e2eUser}, "password": {e2ePassword}}, g.base)
	if r.status != http.StatusTooManyRequests || r.location != nil {
		t.Errorf("the right password while throttled: %d (Location %v), want 429", r.status, r.location)
	}
	// From another browser (same address, same user) too: the limit is the user's, not the
	// cookie's.
	other := newUserAgent(t)
	p = other.open(t, c.authorizeURL(g.resource("everything"), challenge, nil), g.base)
	if r := other.signIn(t, p, e2eUser, e2ePassword, g.base); r.status != http.StatusTooManyRequests {
		t.Errorf("the right password from a new browser while throttled: %d, want 429", r.status)
	}
	// Another user from the same address too: the guesses also count against the address, so
	// spraying one password over many names gets no further.
	third := newUserAgent(t)
	p = third.open(t, c.authorizeURL(g.resource("everything"), challenge, nil), g.base)
	if r := third.signIn(t, p, bob, bobPassword, g.base); r.status != http.StatusTooManyRequests {
		t.Errorf("another user's right password from the guessing address: %d, want 429", r.status)
	}
}

// TestOAuthServerClickjacking: every page (sign-in, consent, error) forbids framing
// (Content-Security-Policy frame-ancestors 'none' and X-Frame-Options DENY), and is neither
// cached nor leaks its URL (with the request id) as a referrer.
func TestOAuthServerClickjacking(t *testing.T) {
	g := startAuthGateway(t, nil)
	c := publicClient(t, g.meta, loopbackRedirect)
	resource := g.resource("everything")

	_, challenge := newPKCE()
	pages := map[string]page{
		"sign-in": newUserAgent(t).open(t, c.authorizeURL(resource, challenge, nil), g.base),
		"consent": consentPage(t, newUserAgent(t), c, resource),
		"error":   newUserAgent(t).get(t, c.authorizeURL(resource, challenge, map[string]string{"redirect_uri": "https://evil.example/cb"})),
	}
	for name, p := range pages {
		h := p.header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s page (%d): Content-Security-Policy %q, want default-src 'none' and frame-ancestors 'none'", name, p.status, csp)
		}
		for header, want := range map[string]string{"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
			if got := h.Get(header); !strings.EqualFold(got, want) {
				t.Errorf("%s page: %s %q, want %q", name, header, got, want)
			}
		}
	}
}

// TestOAuthServerConsentOnce: one authorization request gives one code. The consent form
// posted again (a double click, a replayed post) issues no second code; were it to, one
// consent would mint two grants. The first code still works.
func TestOAuthServerConsentOnce(t *testing.T) {
	g := startAuthGateway(t, nil)
	c := publicClient(t, g.meta, loopbackRedirect)
	resource := g.resource("everything")
	verifier, challenge := newPKCE()
	ua := newUserAgent(t)
	login := ua.open(t, c.authorizeURL(resource, challenge, nil), g.base)
	signedIn := ua.signIn(t, login, e2eUser, e2ePassword, g.base)
	if signedIn.location == nil {
		t.Fatalf("sign-in: %d: %s", signedIn.status, brief(signedIn.body))
	}
	consent := ua.open(t, signedIn.location.String(), g.base)
	f := consent.form(t, "/oauth/consent")
	first := ua.post(t, f.action, url.Values{"csrf": {f.csrf}, "decision": {"allow"}}, g.base)
	second := ua.post(t, f.action, url.Values{"csrf": {f.csrf}, "decision": {"allow"}}, g.base)
	if first.location == nil || first.location.Query().Get("code") == "" {
		t.Fatalf("the consent: %d (Location %v), want a code", first.status, first.location)
	}
	if second.location != nil && second.location.Query().Has("code") {
		t.Errorf("the consent posted again: another code (%d, Location %v); want none", second.status, second.location)
	}
	if tok := c.redeem(t, c.codeOf(t, first.location), verifier, resource); tok.status != http.StatusOK {
		t.Errorf("the first code: %d: %s", tok.status, tok.body)
	}
}
