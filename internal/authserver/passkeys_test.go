package authserver

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// pageAttr returns the value of attribute attr of the element with
// marker in a page (the page is ours: one attribute per name).
func pageAttr(t *testing.T, page, marker, attr string) string {
	t.Helper()
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatalf("no %q in the page", marker)
	}
	m := regexp.MustCompile(attr + `="([^"]*)"`).FindStringSubmatch(page[i:])
	if m == nil {
		t.Fatalf("no %s after %q", attr, marker)
	}
	return html.UnescapeString(m[1])
}

// TestPasskeyOptions: the sign-in page's passkey form asks for a
// discoverable credential of the issuer's host; the passkeys page's asks
// to create one (resident key required) for the signed-in user, under a
// handle that is not the name.
func TestPasskeyOptions(t *testing.T) {
	f := newLoginFixture(t, "https://gw.example.com", nil)
	if strings.Contains(f.get(f.l.url("/oauth/login", f.req.ID)).Body.String(), "data-passkey") {
		t.Errorf("the sign-in page offers passkeys while no one has one")
	}
	f.registerPasskey(t, "carol")
	page := f.get(f.l.url("/oauth/login", f.req.ID)).Body.String()
	var get struct {
		PublicKey struct {
			Challenge        string `json:"challenge"`
			RPID             string `json:"rpId"`
			AllowCredentials []any  `json:"allowCredentials"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(pageAttr(t, page, `data-passkey="get"`, "data-options")), &get); err != nil {
		t.Fatal(err)
	}
	if get.PublicKey.RPID != "gw.example.com" || len(get.PublicKey.Challenge) < 32 || len(get.PublicKey.AllowCredentials) != 0 {
		t.Errorf("login options %+v", get.PublicKey)
	}

	c := f.signIn(t, f.req, "alice", "correct horse")
	w := f.get(f.l.url("/oauth/passkeys", f.req.ID), c)
	if w.Code != http.StatusOK {
		t.Fatalf("passkeys page: %d", w.Code)
	}
	checkPageHeaders(t, "passkeys page", w.Header())
	var create struct {
		PublicKey struct {
			RP   struct{ ID string } `json:"rp"`
			User struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"user"`
			AuthenticatorSelection struct {
				ResidentKey string `json:"residentKey"`
			} `json:"authenticatorSelection"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(pageAttr(t, w.Body.String(), `data-passkey="create"`, "data-options")), &create); err != nil {
		t.Fatal(err)
	}
	pk := create.PublicKey
	if pk.RP.ID != "gw.example.com" || pk.User.Name != "alice" || pk.User.ID == "" || strings.Contains(pk.User.ID, "alice") || pk.AuthenticatorSelection.ResidentKey != "required" {
		t.Errorf("creation options %+v", pk)
	}
}

// TestPasskeyCeremonyBound: a ceremony's sealed state works only on the
// page of the request that began it and, for a registration, for the
// user it began for; a made-up answer is refused and counted by the
// throttle; the passkeys page needs a sign-in.
func TestPasskeyCeremonyBound(t *testing.T) {
	f := newLoginFixture(t, "https://gw.example.com", nil)
	f.registerPasskey(t, "carol")
	other := f.newRequest(t)
	state := pageAttr(t, f.get(f.l.url("/oauth/login", other.ID)).Body.String(), `data-passkey="get"`, `name="state" value`)
	w := f.post(f.l.url("/oauth/passkeys/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "state": {state}, "credential": {`{}`}})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "That passkey did not work") {
		t.Errorf("another request's state: %d\n%s", w.Code, w.Body)
	}
	if !strings.Contains(f.log.String(), "ceremony of another request") {
		t.Errorf("the refusal's reason is not logged:\n%s", f.log.String())
	}
	// The same ceremony posted again, on its own request's page.
	own := pageAttr(t, f.get(f.l.url("/oauth/login", f.req.ID)).Body.String(), `data-passkey="get"`, `name="state" value`)
	for range 2 {
		f.post(f.l.url("/oauth/passkeys/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "state": {own}, "credential": {`{}`}})
	}
	if n := strings.Count(f.log.String(), "ceremony already finished"); n != 1 {
		t.Errorf("a ceremony posted twice: %d refusals as already finished, want 1\n%s", n, f.log.String())
	}
	if w := f.get(f.l.url("/oauth/passkeys", f.req.ID)); w.Code != http.StatusSeeOther {
		t.Errorf("passkeys page without a sign-in: %d", w.Code)
	}

	alice := f.signIn(t, f.req, "alice", "correct horse")
	regState := pageAttr(t, f.get(f.l.url("/oauth/passkeys", f.req.ID), alice).Body.String(), `data-passkey="create"`, `name="state" value`)
	bob := f.signIn(t, f.req, "bob", "battery staple")
	w = f.post(f.l.url("/oauth/passkeys", f.req.ID), url.Values{"csrf": {f.req.CSRF}, "state": {regState}, "credential": {`{}`}}, bob)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "could not be added") || !strings.Contains(f.log.String(), "another user") {
		t.Errorf("alice's ceremony finished by bob: %d\n%s", w.Code, w.Body)
	}
	if keys, _ := f.s.store.Passkeys(t.Context(), "bob"); len(keys) != 0 {
		t.Errorf("bob got a passkey")
	}
	// Three failed passkey sign-ins from one address so far: counted,
	// not yet throttled.
	if n := f.l.throttle.keys[addrKey(newFormRequest(f, "/", nil), false)]; n == nil || n.n != 3 {
		t.Errorf("failures of the address: %+v, want 3", n)
	}
}

// TestPasskeysOffOnIPIssuer: WebAuthn takes a domain, so an issuer on an
// IP address (or passkeys: false) has no passkey routes and no script.
func TestPasskeysOffOnIPIssuer(t *testing.T) {
	for name, f := range map[string]*loginFixture{
		"ip issuer":      newLoginFixture(t, "http://127.0.0.1:8080", nil),
		"passkeys false": newLoginFixture(t, "https://gw.example.com", func(c *config.AuthServer) { c.Passkeys = false }),
	} {
		f.registerPasskey(t, "carol")
		page := f.get(f.l.url("/oauth/login", f.req.ID))
		if strings.Contains(page.Body.String(), "<script") || strings.Contains(page.Header().Get("Content-Security-Policy"), "script-src") {
			t.Errorf("%s: the sign-in page has a script", name)
		}
		if w := f.post(f.l.url("/oauth/passkeys/login", f.req.ID), url.Values{"csrf": {f.req.CSRF}}); w.Code != http.StatusNotFound {
			t.Errorf("%s: passkey login answered %d", name, w.Code)
		}
	}
}
