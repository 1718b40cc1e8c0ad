package authserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
)

// Passkeys (WebAuthn, through go-webauthn): a signed-in person adds one
// from the consent page (GET/POST /oauth/passkeys), and signs in with
// one from the sign-in page (POST /oauth/passkeys/login). The relying
// party is the issuer's host. Passkeys are discoverable: signing in asks
// for no user name, the authenticator names the user by its handle.
//
// A ceremony's state (go-webauthn's SessionData: the challenge, and for
// a registration the user) travels sealed with the key ring in the
// page's form and comes back with the answer, so that any replica can
// finish what another began and nothing is kept per visitor.

const (
	passkeyLoginPurpose    = "authserver passkey login v1"
	passkeyRegisterPurpose = "authserver passkey register v1"
	// passkeyCeremonyTTL bounds a ceremony: a person at the page, then at
	// their authenticator.
	passkeyCeremonyTTL = 10 * time.Minute
)

// passkeyRP is the relying party. Static after newPasskeyRP but used,
// which mu guards.
type passkeyRP struct {
	l  *loginPages
	wa *webauthn.WebAuthn

	mu sync.Mutex
	// used holds the challenges of finished ceremonies until their state
	// expires, so that an answer (and its state) posted again is refused:
	// a ceremony counts once. Per replica: with several, the same answer
	// posted to another replica within passkeyCeremonyTTL is not caught
	// here (the passkey's sign counter is not kept).
	used map[string]time.Time
}

// maxUsedChallenges bounds used: past it, finishing a ceremony waits
// for expired ones to go (a flood of passkey posts is throttled per
// address long before).
const maxUsedChallenges = 10000

// spend marks challenge used, or reports that it already was (or that
// the table is full of live ones).
func (p *passkeyRP) spend(challenge string) bool {
	now := p.l.s.deps.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, seen := p.used[challenge]; seen {
		return false
	}
	if len(p.used) >= maxUsedChallenges {
		for c, until := range p.used {
			if now.After(until) {
				delete(p.used, c)
			}
		}
		if len(p.used) >= maxUsedChallenges {
			return false
		}
	}
	p.used[challenge] = now.Add(passkeyCeremonyTTL)
	return true
}

// newPasskeyRP returns the relying party of the issuer's host, or nil
// (passkeys off, logged) when that host cannot be one: WebAuthn takes a
// domain (localhost included), not an IP address.
func newPasskeyRP(l *loginPages) (*passkeyRP, error) {
	if err := protocol.ValidateRPID(l.issuer.Hostname()); err != nil {
		l.s.deps.Logger.Warn("authserver: passkeys off: the issuer's host is not a domain", "host", l.issuer.Hostname())
		return nil, nil
	}
	wa, err := webauthn.New(&webauthn.Config{
		RPID:          l.issuer.Hostname(),
		RPDisplayName: l.issuer.Host,
		RPOrigins:     []string{l.origin},
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:        protocol.ResidentKeyRequirementRequired,
			RequireResidentKey: protocol.ResidentKeyRequired(),
			UserVerification:   protocol.VerificationPreferred,
		},
		AttestationPreference: protocol.PreferNoAttestation,
	})
	if err != nil {
		return nil, err
	}
	return &passkeyRP{l: l, wa: wa, used: map[string]time.Time{}}, nil
}

// passkeyUser is a user as go-webauthn sees one.
type passkeyUser struct {
	name  string
	creds []webauthn.Credential
}

// userHandle is a user's WebAuthn user handle: a hash of the name, so
// that the authenticator keeps no name in it (WebAuthn 14.6.1) and the
// same user gets the same handle on every replica and after a restart.
func userHandle(name string) []byte {
	h := sha256.Sum256([]byte("mcpgate passkey user\x00" + name))
	return h[:]
}

func (u *passkeyUser) WebAuthnID() []byte                         { return userHandle(u.name) }
func (u *passkeyUser) WebAuthnName() string                       { return u.name }
func (u *passkeyUser) WebAuthnDisplayName() string                { return u.name }
func (u *passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// user loads name's passkeys.
func (p *passkeyRP) user(r *http.Request, name string) (*passkeyUser, error) {
	keys, err := p.l.s.store.Passkeys(r.Context(), name)
	if err != nil {
		return nil, err
	}
	u := &passkeyUser{name: name}
	for _, k := range keys {
		var c webauthn.Credential
		if err := json.Unmarshal(k.Data, &c); err != nil {
			p.l.s.deps.Logger.Warn("authserver: passkey record unreadable", "user", name, "error", err)
			continue
		}
		u.creds = append(u.creds, c)
	}
	return u, nil
}

// ceremony is a ceremony's sealed state: which request's page began it,
// for whom (a registration), and go-webauthn's session.
type ceremony struct {
	Request string               `json:"r"`
	User    string               `json:"u,omitempty"`
	Session webauthn.SessionData `json:"s"`
}

func (p *passkeyRP) seal(purpose string, c ceremony) string {
	b, _ := json.Marshal(c) // cannot fail: strings, bytes and times
	return p.l.s.deps.Ring.Seal(purpose, b, passkeyCeremonyTTL)
}

// open returns the ceremony sealed in state for purpose, if it was
// begun on req's page.
func (p *passkeyRP) open(purpose, state string, req *AuthRequest) (*ceremony, error) {
	b, err := p.l.s.deps.Ring.Open(purpose, state)
	if err != nil {
		return nil, err
	}
	var c ceremony
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if c.Request != req.ID {
		return nil, errors.New("ceremony of another request")
	}
	if !p.spend(c.Session.Challenge) {
		return nil, errors.New("ceremony already finished")
	}
	return &c, nil
}

// loginForm is the sign-in page's passkey form: a fresh challenge for
// any of this site's passkeys. nil (no passkey button) while no one has
// a passkey here (a button that can only fail would confuse the first
// sign-in), or if it cannot be made.
func (p *passkeyRP) loginForm(r *http.Request, req *AuthRequest) *passkeyForm {
	if !p.anyRegistered(r) {
		return nil
	}
	assertion, session, err := p.wa.BeginDiscoverableLogin()
	if err != nil {
		p.l.s.deps.Logger.Error("authserver: passkey login options", "error", err)
		return nil
	}
	opts, _ := json.Marshal(assertion) // go-webauthn's own JSON types
	return &passkeyForm{
		Action:  p.l.url("/oauth/passkeys/login", req.ID),
		Options: string(opts),
		State:   p.seal(passkeyLoginPurpose, ceremony{Request: req.ID, Session: *session}),
	}
}

// anyRegistered reports whether some user who may sign in has a passkey.
func (p *passkeyRP) anyRegistered(r *http.Request) bool {
	for _, name := range p.l.passwords.names() {
		if keys, err := p.l.s.store.Passkeys(r.Context(), name); err == nil && len(keys) > 0 {
			return true
		}
	}
	return false
}

// passkeyLogin checks a passkey's answer to the sign-in page's
// challenge: throttled per address like passwords (the user is not known
// before the answer is checked), and on success signs its user in.
func (l *loginPages) passkeyLogin(w http.ResponseWriter, r *http.Request) {
	req := l.request(w, r)
	if req == nil || l.forged(w, r, req) {
		return
	}
	p := l.passkeys
	addr := addrKey(r, l.s.deps.TrustProxyHeaders)
	if wait := l.throttle.wait(addr); wait > 0 {
		l.s.deps.Logger.Warn("authserver: sign-in throttled", "method", "passkey", "addr", addr, "retryAfter", wait)
		l.tooMany(w, req, wait)
		return
	}
	user, err := p.finishLogin(r, req)
	if err != nil {
		l.throttle.fail(addr)
		l.s.deps.Logger.Warn("authserver: sign-in failed", "method", "passkey", "addr", addr, "client", req.ClientID, "error", err)
		l.showSignIn(w, r, http.StatusOK, req, "That passkey did not work here. Sign in with your password, then add it again.", "")
		return
	}
	l.signedInAs(w, r, req, user, "passkey")
}

func (p *passkeyRP) finishLogin(r *http.Request, req *AuthRequest) (string, error) {
	c, err := p.open(passkeyLoginPurpose, r.PostForm.Get("state"), req)
	if err != nil {
		return "", err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes([]byte(r.PostForm.Get("credential")))
	if err != nil {
		return "", err
	}
	// The handle names the user: one of those who may sign in, found by
	// comparing handles (they are hashes of names, not names).
	byHandle := func(_, handle []byte) (webauthn.User, error) {
		for _, name := range p.l.passwords.names() {
			if bytes.Equal(userHandle(name), handle) {
				return p.user(r, name)
			}
		}
		return nil, errors.New("no such user")
	}
	u, _, err := p.wa.ValidatePasskeyLogin(byHandle, c.Session, parsed)
	if err != nil {
		return "", err
	}
	return u.(*passkeyUser).name, nil
}

// passkeysView is the passkeys page's content.
type passkeysView struct {
	User, Options, State, Count, BackURL string
}

// passkeysPage offers a signed-in person to add a passkey.
func (l *loginPages) passkeysPage(w http.ResponseWriter, r *http.Request) {
	req := l.request(w, r)
	if req == nil {
		return
	}
	name, _, ok := l.signedInFor(w, r, req)
	if !ok {
		return
	}
	l.showPasskeys(w, r, req, name, "")
}

func (l *loginPages) showPasskeys(w http.ResponseWriter, r *http.Request, req *AuthRequest, name, errText string) {
	p := l.passkeys
	u, err := p.user(r, name)
	if err != nil {
		l.s.deps.Logger.Error("authserver: passkeys", "user", name, "error", err)
		l.errorPage(w, http.StatusServiceUnavailable, "Something went wrong",
			"The gateway could not read your passkeys.", "Try again in a moment.")
		return
	}
	exclude := make([]protocol.CredentialDescriptor, 0, len(u.creds))
	for _, c := range u.creds {
		exclude = append(exclude, c.Descriptor())
	}
	creation, session, err := p.wa.BeginRegistration(u, webauthn.WithExclusions(exclude))
	if err != nil {
		l.s.deps.Logger.Error("authserver: passkey options", "user", name, "error", err)
		l.errorPage(w, http.StatusInternalServerError, "Something went wrong",
			"The gateway could not start adding a passkey.", "Try again in a moment.")
		return
	}
	opts, _ := json.Marshal(creation)
	count := "You have no passkey here yet."
	switch n := len(u.creds); {
	case n == 1:
		count = "You have one passkey here already."
	case n > 1:
		count = "You have " + strconv.Itoa(n) + " passkeys here already."
	}
	l.render(w, http.StatusOK, "passkeys", &pageData{
		Title:  "Add a passkey",
		Error:  errText,
		Action: l.url("/oauth/passkeys", req.ID),
		CSRF:   req.CSRF,
		Passkeys: &passkeysView{
			User:    name,
			Options: string(opts),
			State:   p.seal(passkeyRegisterPurpose, ceremony{Request: req.ID, User: name, Session: *session}),
			Count:   count,
			BackURL: l.url("/oauth/consent", req.ID),
		},
	}, "")
}

// passkeysPost stores the passkey a signed-in person's authenticator
// made, then shows the consent page again, saying so.
func (l *loginPages) passkeysPost(w http.ResponseWriter, r *http.Request) {
	req := l.request(w, r)
	if req == nil || l.forged(w, r, req) {
		return
	}
	name, _, ok := l.signedInFor(w, r, req)
	if !ok {
		return
	}
	if err := l.passkeys.register(r, req, name); err != nil {
		l.s.deps.Logger.Warn("authserver: passkey not added", "user", name, "error", err)
		l.showPasskeys(w, r, req, name, "The passkey could not be added. Try again.")
		return
	}
	l.s.deps.Logger.Info("authserver: passkey added", "user", name)
	l.showConsent(w, r, req, name, "Passkey added: next time, sign in with it.")
}

func (p *passkeyRP) register(r *http.Request, req *AuthRequest, name string) error {
	c, err := p.open(passkeyRegisterPurpose, r.PostForm.Get("state"), req)
	if err != nil {
		return err
	}
	if c.User != name {
		return errors.New("ceremony begun for another user")
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes([]byte(r.PostForm.Get("credential")))
	if err != nil {
		return err
	}
	u, err := p.user(r, name)
	if err != nil {
		return err
	}
	cred, err := p.wa.CreateCredential(u, c.Session, parsed)
	if err != nil {
		return err
	}
	data, err := json.Marshal(cred)
	if err != nil {
		return err
	}
	return p.l.s.store.PutPasskey(r.Context(), &Passkey{User: name, ID: cred.ID, Data: data, CreatedAt: p.l.s.deps.Now()})
}
