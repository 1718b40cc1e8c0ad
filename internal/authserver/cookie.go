package authserver

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The sign-in cookie: after a sign-in, the browser holds who signed in
// and when, sealed with the gateway's key ring (so every replica reads
// it, and no one can write one), for signInTTL. With it the same browser
// goes straight to the consent page of later requests: it is still
// asked to consent to each, but not to sign in again.

const (
	// signInTTL is how long a sign-in lasts in a browser.
	signInTTL = 12 * time.Hour
	// signInPurpose binds sealed sign-ins to this use of the ring.
	signInPurpose = "authserver sign-in v1"
)

// signIn is the sealed content of the cookie.
type signIn struct {
	User string `json:"u"`
	At   int64  `json:"t"` // Unix seconds of the sign-in
}

// cookieName is the cookie's name for issuer: the __Host- prefix (the
// browser then insists on Secure, Path=/ and no Domain, so no other
// host or path can plant one) except on an http issuer on loopback,
// where Secure cannot be.
func cookieName(issuer *url.URL) string {
	if insecureLoopback(issuer) {
		return "mcpgate-login"
	}
	return "__Host-mcpgate-login"
}

// insecureLoopback reports an http issuer on a loopback host (a
// gateway tried on one machine).
func insecureLoopback(issuer *url.URL) bool {
	if issuer.Scheme != "http" {
		return false
	}
	host := issuer.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// setSignIn gives the browser the cookie of user's sign-in at at.
func (l *loginPages) setSignIn(w http.ResponseWriter, user string, at time.Time) {
	b, _ := json.Marshal(signIn{User: user, At: at.Unix()}) // cannot fail: strings and an int
	http.SetCookie(w, &http.Cookie{
		Name:     l.cookie,
		Value:    l.s.deps.Ring.Seal(signInPurpose, b, signInTTL),
		Path:     "/",
		MaxAge:   int(signInTTL / time.Second),
		Secure:   !insecureLoopback(l.issuer),
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	})
}

// signedIn returns who signed in on this browser, and when, if its
// cookie is one the ring sealed, not expired, for a user who may still
// sign in. A cookie that is there but does not open is logged (someone
// tampered with it, or the ring lost its key) and ignored.
func (l *loginPages) signedIn(r *http.Request) (string, time.Time, bool) {
	c, err := r.Cookie(l.cookie)
	if err != nil {
		return "", time.Time{}, false
	}
	plain, err := l.s.deps.Ring.Open(signInPurpose, c.Value)
	if err != nil {
		l.s.deps.Logger.Info("authserver: sign-in cookie refused", "error", err, "addr", clientPrefix(r, l.s.deps.TrustProxyHeaders))
		return "", time.Time{}, false
	}
	var si signIn
	if err := json.Unmarshal(plain, &si); err != nil || !l.passwords.known(si.User) {
		return "", time.Time{}, false
	}
	return si.User, time.Unix(si.At, 0), true
}

// signedInFor is signedIn for a page of req that needs a signed-in
// browser: one that is not is sent to req's sign-in page.
func (l *loginPages) signedInFor(w http.ResponseWriter, r *http.Request, req *AuthRequest) (string, time.Time, bool) {
	user, at, ok := l.signedIn(r)
	if !ok {
		http.Redirect(w, r, l.url("/oauth/login", req.ID), http.StatusSeeOther)
	}
	return user, at, ok
}
