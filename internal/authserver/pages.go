package authserver

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The pages a person sees: html/template files embedded from pages/,
// one layout, no external assets and no JavaScript but passkey.js, which
// the page's Content-Security-Policy allows by its hash (as it does the
// one stylesheet), so that nothing injected could run or restyle a page.

//go:embed pages
var pageFiles embed.FS

// pageSet holds the parsed templates, the stylesheet and the script, and
// the CSP sources that allow exactly those two. Static after
// newPageSet.
type pageSet struct {
	byName     map[string]*template.Template
	css        template.CSS
	script     template.JS
	styleHash  string // 'sha256-...' of css
	scriptHash string // 'sha256-...' of script
}

func newPageSet() (*pageSet, error) {
	css, err := pageFiles.ReadFile("pages/style.css")
	if err != nil {
		return nil, err
	}
	js, err := pageFiles.ReadFile("pages/passkey.js")
	if err != nil {
		return nil, err
	}
	layout, err := template.ParseFS(pageFiles, "pages/layout.html")
	if err != nil {
		return nil, err
	}
	ps := &pageSet{
		byName:     map[string]*template.Template{},
		css:        template.CSS(css),
		script:     template.JS(js),
		styleHash:  cspHash(css),
		scriptHash: cspHash(js),
	}
	for _, name := range []string{"signin", "consent", "passkeys", "error"} {
		t, err := template.Must(layout.Clone()).ParseFS(pageFiles, "pages/"+name+".html")
		if err != nil {
			return nil, err
		}
		ps.byName[name] = t
	}
	return ps, nil
}

// cspHash is a CSP hash source of an inline element's exact text.
func cspHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// pageData is what a template gets: the layout's fields, and the fields of
// the one page it is.
type pageData struct {
	Title  string
	Host   string // the issuer's host, whom the person is signing in to
	Error  string
	Notice string
	CSS    template.CSS
	Script template.JS // set on pages with a passkey form only

	Action string // the form's action: issuer path + route + ?request=ID
	CSRF   string

	// sign-in
	Asking     *asking
	Passwords  bool // some user has a password: the user name and password form
	Username   string
	CodeAction string // set while a one-time code is good
	Passkey    *passkeyForm

	// consent
	Consent *consentView

	// passkeys
	Passkeys *passkeysView

	// error
	Message, Hint string
	BackURL       string // a link back to the sign-in page (429)
}

// asking says on the sign-in page what the sign-in is for.
type asking struct{ Client, Resource string }

// passkeyForm is a passkey ceremony's form: the browser's options
// (JSON) and the sealed ceremony state the server gets back with the
// answer.
type passkeyForm struct {
	Action, Options, State string
}

// render writes page name with status, after the headers every page has
// (securityHeaders). formTo is the extra origin its forms may end up at
// (the client's redirect URI, for the consent page), or "".
func (l *loginPages) render(w http.ResponseWriter, status int, name string, p *pageData, formTo string) {
	var buf bytes.Buffer
	p.CSS = l.pages.css
	p.Host = l.issuer.Host
	script := ""
	if p.Passkey != nil || p.Passkeys != nil {
		p.Script = l.pages.script
		script = l.pages.scriptHash
	}
	if err := l.pages.byName[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		l.s.deps.Logger.Error("authserver: page", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", l.csp(script, formTo))
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// securityHeaders are set on every response of the login pages,
// redirects included: no framing (clickjacking of Allow), no caching of
// pages that carry a CSRF token, no Referer (the request's URL names its
// id), and a CSP that allows nothing until render widens it to the page.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; form-action 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// csp is a page's Content-Security-Policy: its stylesheet and (passkey
// pages) script by hash, forms posting to this server only, and, on the
// consent page, on to the client's redirect URI (browsers apply
// form-action to the redirect that follows a form's POST).
func (l *loginPages) csp(scriptHash, formTo string) string {
	var b strings.Builder
	b.WriteString("default-src 'none'; style-src ")
	b.WriteString(l.pages.styleHash)
	if scriptHash != "" {
		b.WriteString("; script-src ")
		b.WriteString(scriptHash)
	}
	b.WriteString("; img-src data:; form-action 'self'")
	if formTo != "" {
		b.WriteString(" ")
		b.WriteString(formTo)
	}
	b.WriteString("; frame-ancestors 'none'; base-uri 'none'")
	return b.String()
}

// cspSource is the CSP source expression allowing navigation to uri: its
// origin for http(s), its scheme for a private-use scheme
// (com.example.app:/callback, RFC 8252 7.1). "" if uri cannot be one.
func cspSource(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	for _, c := range scheme {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return ""
		}
	}
	if scheme != "http" && scheme != "https" {
		return scheme + ":"
	}
	if u.Host == "" || strings.ContainsAny(u.Host, " ;,'\"") {
		return ""
	}
	return scheme + "://" + u.Host
}

// errorPage answers with the error page: title and message for the
// person, hint on what to do next.
func (l *loginPages) errorPage(w http.ResponseWriter, status int, title, message, hint string) {
	l.render(w, status, "error", &pageData{Title: title, Message: message, Hint: hint}, "")
}
