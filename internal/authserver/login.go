package authserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The login part: the sign-in page (password, one-time code, passkey)
// and the consent page (consent.go) between /oauth/authorize and the
// code, and the passkey pages (passkeys.go). The provider hands a stored
// AuthRequest to start; the pages carry its id in ?request= and its CSRF
// token in every form, and end by calling the provider's finish (Allow)
// or refuse (Deny).
//
// Form contract (the provider's and peers' tests, and real-client
// drivers, post these):
//   - sign-in: POST {issuer path}/oauth/login?request=ID with csrf and
//     username + password, or code (the one-time code). Success: 303 to
//     the consent page; wrong: 200 with the page and an error; 429 when
//     throttled.
//   - consent: POST {issuer path}/oauth/consent?request=ID with csrf and
//     decision=allow|deny. Allow: whatever finish answers (303 to the
//     client with the code).

// maxFormBytes bounds a form's body: the largest is a passkey's answer.
const maxFormBytes = 64 << 10

// loginPages serves the pages. Everything is static after
// newLoginPages but the throttle and the sign-in code, each guarded by
// its own lock.
type loginPages struct {
	s         *Server
	issuer    *url.URL
	prefix    string // the issuer's path, "" or "/x": every route is under it
	origin    string // the issuer's origin, what Origin must be on a POST
	cookie    string // the sign-in cookie's name
	pages     *pageSet
	passwords *passwords
	throttle  *throttle
	code      *signInCode // nil without cfg.SignInCode
	passkeys  *passkeyRP  // nil without cfg.Passkeys, or on an issuer that is an IP address

	// finish and refuse end a request (tests replace them); nil: the
	// provider's.
	finish func(http.ResponseWriter, *http.Request, *AuthRequest)
	refuse func(w http.ResponseWriter, r *http.Request, req *AuthRequest, code, description string)
}

func newLoginPages(s *Server) (*loginPages, error) {
	issuer, err := url.Parse(s.cfg.Issuer)
	if err != nil || issuer.Host == "" {
		return nil, fmt.Errorf("authserver: issuer %q: not an absolute URL", s.cfg.Issuer)
	}
	l := &loginPages{
		s:        s,
		issuer:   issuer,
		prefix:   strings.TrimSuffix(issuer.Path, "/"),
		origin:   issuer.Scheme + "://" + issuer.Host,
		cookie:   cookieName(issuer),
		throttle: newThrottle(s.deps.Now),
	}
	if l.pages, err = newPageSet(); err != nil {
		return nil, err
	}
	if l.passwords, err = newPasswords(s.cfg.Users); err != nil {
		return nil, err
	}
	l.throttle.keep = map[string]bool{}
	for _, name := range l.passwords.names() {
		l.throttle.keep[userKey(name)] = true
	}
	if s.cfg.Passkeys {
		if l.passkeys, err = newPasskeyRP(l); err != nil {
			return nil, err
		}
	}
	if s.cfg.SignInCode {
		var code string
		code, l.code = newSignInCode()
		s.deps.Logger.Warn("authserver: one-time sign-in code (good for one sign-in, then gone): "+code,
			"user", l.passwords.names()[0], "url", s.cfg.Issuer)
	}
	return l, nil
}

func (l *loginPages) routes(mux *http.ServeMux) {
	handle := func(pattern string, h http.HandlerFunc) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+l.prefix+path, func(w http.ResponseWriter, r *http.Request) {
			securityHeaders(w)
			h(w, r)
		})
	}
	handle("GET /oauth/login", l.signInPage)
	handle("POST /oauth/login", l.signInPost)
	handle("GET /oauth/consent", l.consentPage)
	handle("POST /oauth/consent", l.consentPost)
	if l.passkeys != nil {
		handle("POST /oauth/passkeys/login", l.passkeyLogin)
		handle("GET /oauth/passkeys", l.passkeysPage)
		handle("POST /oauth/passkeys", l.passkeysPost)
	}
}

// start is where /authorize sends the user agent once it has stored
// req: the sign-in page (or, for a user already signed in, the consent
// page) of that request.
func (l *loginPages) start(w http.ResponseWriter, r *http.Request, req *AuthRequest) {
	securityHeaders(w)
	if _, _, ok := l.signedIn(r); ok {
		http.Redirect(w, r, l.url("/oauth/consent", req.ID), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, l.url("/oauth/login", req.ID), http.StatusSeeOther)
}

// url is the path of a page of request id.
func (l *loginPages) url(route, id string) string {
	return l.prefix + route + "?request=" + url.QueryEscape(id)
}

// request returns the AuthRequest a page is for, or answers with the
// error page and returns nil.
func (l *loginPages) request(w http.ResponseWriter, r *http.Request) *AuthRequest {
	id := r.URL.Query().Get("request")
	var req *AuthRequest
	var err error
	if id != "" && len(id) <= 256 {
		req, err = l.s.store.AuthRequest(r.Context(), id)
	} else {
		err = ErrNotFound
	}
	switch {
	case errors.Is(err, ErrNotFound):
		l.errorPage(w, http.StatusBadRequest, "This sign-in link has expired",
			"Sign-in requests last ten minutes: this one is over, or was never made here.",
			"Go back to the application and connect again.")
		return nil
	case err != nil:
		l.s.deps.Logger.Error("authserver: auth request", "error", err)
		l.errorPage(w, http.StatusServiceUnavailable, "Something went wrong",
			"The gateway could not read this request.", "Try again in a moment.")
		return nil
	}
	return req
}

// forged checks a POST of req's page: the body is read (bounded), its
// csrf field must be req's token, and Origin (or, without one, Referer)
// must be the issuer's origin, so that neither another site nor a form
// it copied can post for the person. On a forgery it answers with a 403
// page, logs it, and returns true.
func (l *loginPages) forged(w http.ResponseWriter, r *http.Request, req *AuthRequest) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	reason := ""
	switch err := r.ParseForm(); {
	case err != nil:
		reason = "unreadable form"
	case subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(req.CSRF)) != 1 || req.CSRF == "":
		reason = "wrong or missing csrf token"
	case !l.sameOrigin(r):
		reason = "cross-origin post"
	default:
		return false
	}
	l.s.deps.Logger.Warn("authserver: form refused", "reason", reason, "path", r.URL.Path,
		"origin", r.Header.Get("Origin"), "addr", clientPrefix(r, l.s.deps.TrustProxyHeaders))
	l.errorPage(w, http.StatusForbidden, "This form cannot be used",
		"It was not sent from this page, or the page is out of date.",
		"Go back to the application and connect again.")
	return true
}

// sameOrigin reports whether a POST came from one of the issuer's pages:
// its Origin, or its Referer when there is no Origin, is the issuer's.
// One exception: the pages send Referrer-Policy: no-referrer, and under
// that policy a browser serializes a POST's Origin as "null" even from
// the page's own origin (Fetch, "append a request Origin header"), and
// sends no Referer. Such a POST counts as same-origin when
// Sec-Fetch-Site, which only the browser writes, says same-origin: a
// sandboxed frame or another site also sends "null", but never with
// that.
func (l *loginPages) sameOrigin(r *http.Request) bool {
	switch o := r.Header.Get("Origin"); o {
	case "null":
		return r.Header.Get("Sec-Fetch-Site") == "same-origin"
	case "":
	default:
		return strings.EqualFold(o, l.origin)
	}
	ref, err := url.Parse(r.Header.Get("Referer"))
	return err == nil && ref.Host != "" && strings.EqualFold(ref.Scheme+"://"+ref.Host, l.origin)
}

// signInPage shows the sign-in form, or, for a browser already signed
// in, goes on to the consent page (unless ?switch asks to sign in as
// someone else).
func (l *loginPages) signInPage(w http.ResponseWriter, r *http.Request) {
	req := l.request(w, r)
	if req == nil {
		return
	}
	if _, _, ok := l.signedIn(r); ok && !r.URL.Query().Has("switch") {
		http.Redirect(w, r, l.url("/oauth/consent", req.ID), http.StatusSeeOther)
		return
	}
	l.showSignIn(w, r, http.StatusOK, req, "", "")
}

// showSignIn renders the sign-in page of req with an error, the user
// name typed kept.
func (l *loginPages) showSignIn(w http.ResponseWriter, r *http.Request, status int, req *AuthRequest, errText, username string) {
	p := &pageData{
		Title:     "Sign in",
		Error:     errText,
		Action:    l.url("/oauth/login", req.ID),
		CSRF:      req.CSRF,
		Username:  username,
		Asking:    l.asking(r, req),
		Passwords: l.passwords.any(),
	}
	if l.code.usable() {
		p.CodeAction = p.Action
	}
	if l.passkeys != nil {
		p.Passkey = l.passkeys.loginForm(r, req)
	}
	l.render(w, status, "signin", p, "")
}

// signInPost checks a password or the one-time code: throttled, logged,
// and on success the browser gets the sign-in cookie and goes on to the
// consent page.
func (l *loginPages) signInPost(w http.ResponseWriter, r *http.Request) {
	req := l.request(w, r)
	if req == nil || l.forged(w, r, req) {
		return
	}
	username := strings.TrimSpace(r.PostForm.Get("username"))
	code := r.PostForm.Get("code")
	method := "password"
	if code != "" {
		method = "code"
		if username == "" {
			username = l.passwords.names()[0]
		}
	}
	addr := addrKey(r, l.s.deps.TrustProxyHeaders)
	logged := username
	if !l.passwords.known(username) {
		logged = "(unknown)" // a name typed wrong may be a password typed in the wrong box
	}
	// The attempt counts as a failure from here (attempt), and is taken
	// back on success; a client that goes away meanwhile has used it.
	if wait := l.throttle.attempt(userKey(username), addr); wait > 0 {
		l.s.deps.Logger.Warn("authserver: sign-in throttled", "user", logged, "method", method, "addr", addr, "retryAfter", wait)
		l.tooMany(w, req, wait)
		return
	}
	var ok bool
	if code != "" {
		ok = l.passwords.known(username) && l.code.take(code)
	} else {
		var err error
		if ok, err = l.passwords.check(r.Context(), username, r.PostForm.Get("password")); err != nil {
			return // the client went away while it queued
		}
	}
	if !ok {
		l.throttle.failed(userKey(username), addr)
		l.s.deps.Logger.Warn("authserver: sign-in failed", "user", logged, "method", method, "addr", addr, "client", req.ClientID)
		msg := "Wrong user name or password."
		if code != "" {
			msg = "That code is wrong, or it was already used."
		}
		l.showSignIn(w, r, http.StatusOK, req, msg, strings.TrimSpace(r.PostForm.Get("username")))
		return
	}
	l.throttle.succeeded(addr)
	l.signedInAs(w, r, req, username, method)
}

// signedInAs ends a successful sign-in: the user's failures are
// forgotten, the browser gets the cookie, and it goes on to consent.
func (l *loginPages) signedInAs(w http.ResponseWriter, r *http.Request, req *AuthRequest, user, method string) {
	l.throttle.forget(userKey(user))
	l.setSignIn(w, user, l.s.deps.Now())
	l.s.deps.Logger.Info("authserver: signed in", "user", user, "method", method,
		"addr", clientPrefix(r, l.s.deps.TrustProxyHeaders), "client", req.ClientID)
	http.Redirect(w, r, l.url("/oauth/consent", req.ID), http.StatusSeeOther)
}

// tooMany answers a throttled attempt.
func (l *loginPages) tooMany(w http.ResponseWriter, req *AuthRequest, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	l.render(w, http.StatusTooManyRequests, "error", &pageData{
		Title:   "Too many attempts",
		Message: "Sign-in is paused after several failed attempts.",
		Hint:    fmt.Sprintf("Try again in %s.", waitText(secs)),
		BackURL: l.url("/oauth/login", req.ID),
	}, "")
}

// waitText says secs for a person.
func waitText(secs int) string {
	switch {
	case secs <= 1:
		return "a second"
	case secs < 60:
		return strconv.Itoa(secs) + " seconds"
	case secs < 120:
		return "a minute"
	}
	return strconv.Itoa((secs+59)/60) + " minutes"
}
