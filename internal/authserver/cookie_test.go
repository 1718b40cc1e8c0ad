package authserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSignInCookieTampered: a sign-in cookie altered by one character,
// sealed for another purpose, for a user no longer configured, or made
// up, is ignored (the browser is sent to sign in), and a refused seal is
// logged.
func TestSignInCookieTampered(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	good := f.signIn(t, f.req, "alice", "correct horse")
	flip := []byte(good.Value)
	i := len(flip) / 2
	flip[i] = map[bool]byte{true: 'B', false: 'A'}[flip[i] == 'A']
	gone, _ := json.Marshal(signIn{User: "mallory", At: f.clock.Now().Unix()})
	other, _ := json.Marshal(signIn{User: "alice", At: f.clock.Now().Unix()})
	for name, value := range map[string]string{
		"altered":         string(flip),
		"made up":         "alice",
		"unknown user":    f.s.deps.Ring.Seal(signInPurpose, gone, time.Hour),
		"another purpose": f.s.deps.Ring.Seal(passkeyLoginPurpose, other, time.Hour),
	} {
		c := &http.Cookie{Name: f.l.cookie, Value: value}
		w := f.get(f.l.url("/oauth/consent", f.req.ID), c)
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != f.l.url("/oauth/login", f.req.ID) {
			t.Errorf("%s cookie: %d, Location %q: want the sign-in page", name, w.Code, w.Header().Get("Location"))
		}
	}
	if n := strings.Count(f.log.String(), "sign-in cookie refused"); n != 3 {
		t.Errorf("%d refused cookies logged, want 3 (altered, made up, another purpose)", n)
	}
	if w := f.get(f.l.url("/oauth/consent", f.req.ID), good); w.Code != http.StatusOK {
		t.Errorf("the good cookie: %d", w.Code)
	}
}

// TestSignInCookieCarriesToLaterRequests: the same browser's next
// request goes from the sign-in page straight to its consent page; with
// ?switch it may sign in as someone else.
func TestSignInCookieCarriesToLaterRequests(t *testing.T) {
	f := newLoginFixture(t, "", nil)
	c := f.signIn(t, f.req, "alice", "correct horse")
	next := f.newRequest(t)
	w := f.get(f.l.url("/oauth/login", next.ID), c)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != f.l.url("/oauth/consent", next.ID) {
		t.Errorf("next request: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	if w := f.get(f.l.url("/oauth/login", next.ID)+"&switch=1", c); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `name="password"`) {
		t.Errorf("switch: %d", w.Code)
	}
	if c.MaxAge != int(signInTTL/time.Second) {
		t.Errorf("Max-Age %d, want %d", c.MaxAge, int(signInTTL/time.Second))
	}
}
