package authserver

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsentPageNamesEverything: the consent page names the client,
// its home page's host, the redirect host, the resource by name and URL,
// the scopes and the user, and posts decision=allow|deny with the csrf
// to /oauth/consent?request=ID; its CSP lets the form's answer go on to
// the client's redirect origin and nowhere else.
func TestConsentPageNamesEverything(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	c := f.signIn(t, f.req, "alice", "correct horse")
	w := f.get(f.l.url("/oauth/consent", f.req.ID), c)
	if w.Code != http.StatusOK {
		t.Fatalf("consent page: %d\n%s", w.Code, w.Body)
	}
	checkPageHeaders(t, "consent page", w.Header())
	body := w.Body.String()
	for _, want := range []string{
		`<form method="post" action="/oauth/consent?request=` + f.req.ID + `">`,
		`<input type="hidden" name="csrf" value="` + f.req.CSRF + `">`,
		`name="decision" value="allow"`, `name="decision" value="deny"`,
		loginClientName, "from claude.ai", "<dd>claude.ai</dd>", "the memory server", loginResource, "<code>mcp</code>", "alice",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' https://claude.ai;") {
		t.Errorf("CSP %q: want form-action 'self' https://claude.ai", csp)
	}
}

// TestConsentNeedsSignIn: without a sign-in cookie, the consent page
// and its POST send the browser to the sign-in page.
func TestConsentNeedsSignIn(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	for _, w := range []*http.Response{
		f.get(f.l.url("/oauth/consent", f.req.ID)).Result(),
		f.post(f.l.url("/oauth/consent", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "decision": {"allow"}}).Result(),
	} {
		if w.StatusCode != http.StatusSeeOther || w.Header.Get("Location") != f.l.url("/oauth/login", f.req.ID) {
			t.Errorf("%d, Location %q", w.StatusCode, w.Header.Get("Location"))
		}
	}
	if len(f.ended.finished) != 0 {
		t.Errorf("finish called without a sign-in")
	}
}

// TestConsentAllowCallsFinish: Allow stores the request with its user,
// sign-in time and consent, then hands it to the provider's finish.
func TestConsentAllowCallsFinish(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	c := f.signIn(t, f.req, "bob", "battery staple")
	w := f.post(f.l.url("/oauth/consent", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "decision": {"allow"}}, c)
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), loginRedirect+"?code=") {
		t.Fatalf("allow: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	if len(f.ended.finished) != 1 {
		t.Fatalf("finish called %d times", len(f.ended.finished))
	}
	got := f.ended.finished[0]
	if got.ID != f.req.ID || got.User != "bob" || !got.Consented || !got.AuthTime.Equal(f.clock.Now().Truncate(1e9)) {
		t.Errorf("finish got %+v", got)
	}
	stored, err := f.s.store.AuthRequest(context.Background(), f.req.ID)
	if err != nil || stored.User != "bob" || !stored.Consented || stored.AuthTime.IsZero() {
		t.Errorf("stored request %+v, %v", stored, err)
	}
	if len(f.ended.refused) != 0 {
		t.Errorf("refuse called too: %v", f.ended.refused)
	}
}

// TestConsentDenyCallsRefuse: Deny hands the request to refuse with
// access_denied; an answer that is neither is a 400 page.
func TestConsentDenyCallsRefuse(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	c := f.signIn(t, f.req, "alice", "correct horse")
	w := f.post(f.l.url("/oauth/consent", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "decision": {"maybe"}}, c)
	if w.Code != http.StatusBadRequest {
		t.Errorf("decision=maybe: %d", w.Code)
	}
	w = f.post(f.l.url("/oauth/consent", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "decision": {"deny"}}, c)
	if w.Code != http.StatusSeeOther || len(f.ended.refused) != 1 || !strings.HasPrefix(f.ended.refused[0], "access_denied: ") {
		t.Errorf("deny: %d, refused %v", w.Code, f.ended.refused)
	}
	if len(f.ended.finished) != 0 {
		t.Errorf("finish called on deny")
	}
}

// TestConsentOfDeletedClient: a client deleted since /authorize gets an
// error page, not a consent page.
func TestConsentOfDeletedClient(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	c := f.signIn(t, f.req, "alice", "correct horse")
	if err := f.s.store.DeleteClient(context.Background(), "client-1"); err != nil {
		t.Fatal(err)
	}
	if w := f.get(f.l.url("/oauth/consent", f.req.ID), c); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not known") {
		t.Errorf("%d\n%s", w.Code, w.Body)
	}
}

func TestResourceLabel(t *testing.T) {
	for in, want := range map[string]string{
		"https://gw.example.com/servers/memory/mcp":     "the memory server",
		"https://gw.example.com/gw/endpoints/notes/mcp": "the notes endpoint",
		"https://gw.example.com/mcp":                    "gw.example.com/mcp",
		"https://memory.gw.example.com/mcp":             "memory.gw.example.com/mcp",
		"not a url":                                     "not a url",
	} {
		if got := resourceLabel(in); got != want {
			t.Errorf("resourceLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDisplayHost(t *testing.T) {
	for in, want := range map[string]string{
		"https://claude.ai/api/mcp/auth_callback": "claude.ai",
		"http://127.0.0.1:33418/callback":         "127.0.0.1:33418",
		"com.example.app:/oauth":                  "com.example.app:",
		"":                                        "",
	} {
		if got := displayHost(in); got != want {
			t.Errorf("displayHost(%q) = %q, want %q", in, got, want)
		}
	}
}
