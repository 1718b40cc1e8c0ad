package admin

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"html"
	"net/http"
	"strings"
	"time"
)

// The status page is one HTML file with its style and script inline
// (status.html, no build step). Its Content-Security-Policy allows that
// script and style by their hashes and nothing else inline; the page
// holds no data and no token: its script polls the admin API every 2 s
// with the browser's cookie and sets everything it shows as textContent
// (a server's stderr is untrusted).
//
// A browser gets the cookie by visiting /status?token=TOKEN once, or by
// posting the token with the login form /status shows without one: it is
// HttpOnly (no script reads it), SameSite=Strict (no other site's request
// carries it), Secure over TLS, for 12 hours; either way the browser is
// sent on to a plain /status, so the token leaves the address bar. A
// cookie is checked on every request as the token itself would be.

//go:embed status.html
var statusPage []byte

// statusCSP is the status page's Content-Security-Policy.
var statusCSP = "default-src 'none'; script-src 'self' " + inlineHash(statusPage, "script") +
	"; style-src " + inlineHash(statusPage, "style") +
	"; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// loginCSP is the login page's: no script, no style.
const loginCSP = "default-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// inlineHash returns the CSP source of page's first inline element tag
// ('sha256-...' of its content).
func inlineHash(page []byte, tag string) string {
	s := string(page)
	_, rest, ok := strings.Cut(s, "<"+tag+">")
	if !ok {
		panic("admin: status.html has no <" + tag + ">")
	}
	body, _, ok := strings.Cut(rest, "</"+tag+">")
	if !ok {
		panic("admin: status.html has no </" + tag + ">")
	}
	sum := sha256.Sum256([]byte(body))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// cookieAge is how long the admin cookie lasts.
const cookieAge = 12 * time.Hour

// serveStatus serves /status: the page, the login form, and setting or
// clearing the cookie.
func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if tok := r.URL.Query().Get("token"); tok != "" {
			h.login(w, r, tok)
			return
		}
		tok := credential(r)
		if tok == "" {
			h.loginPage(w, http.StatusUnauthorized, "")
			return
		}
		if status, why := h.check(r, tok); status != 0 {
			h.loginPage(w, status, why)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", statusCSP)
		_, _ = w.Write(statusPage)
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
		if err := r.ParseForm(); err != nil {
			h.loginPage(w, http.StatusBadRequest, "bad form")
			return
		}
		if r.PostForm.Get("logout") != "" {
			http.SetCookie(w, h.cookie(r, "", -1))
			seeStatus(w)
			return
		}
		h.login(w, r, r.PostForm.Get("token"))
	default:
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, errorBody("method "+r.Method+" not allowed"))
	}
}

// login sets the cookie to tok when it opens the admin API, and sends the
// browser to /status; else it shows the form again.
func (h *Handler) login(w http.ResponseWriter, r *http.Request, tok string) {
	if status, why := h.check(r, strings.TrimSpace(tok)); status != 0 {
		h.loginPage(w, status, why)
		return
	}
	http.SetCookie(w, h.cookie(r, strings.TrimSpace(tok), int(cookieAge/time.Second)))
	seeStatus(w)
}

func (h *Handler) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: cookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

// loginPage answers status with the login form and why ("" for none).
func (h *Handler) loginPage(w http.ResponseWriter, status int, why string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", loginCSP)
	w.WriteHeader(status)
	msg := ""
	if why != "" {
		msg = "<p><b>" + html.EscapeString(why) + "</b></p>\n"
	}
	_, _ = w.Write([]byte(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>mcpgate status: log in</title></head>
<body><h1>mcpgate status</h1>
` + msg + `<form method="post" action="status">
<label>Admin token <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button type="submit">log in</button>
</form></body></html>
`))
}

// seeStatus sends the browser to a plain /status, relative (a proxy may
// serve the gateway under a path), without the token in the address bar.
func seeStatus(w http.ResponseWriter) {
	w.Header().Set("Location", "status")
	w.WriteHeader(http.StatusSeeOther)
}
