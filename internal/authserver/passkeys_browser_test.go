package authserver

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
)

// virtualAuthenticator gives the browser a platform authenticator that
// keeps discoverable credentials and verifies its user at once (Chrome
// DevTools' WebAuthn domain), and returns it.
func virtualAuthenticator(t *testing.T, ctx context.Context) webauthn.AuthenticatorID {
	t.Helper()
	var id webauthn.AuthenticatorID
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, webauthn.Enable, webauthn.EnableParams{}); err != nil {
			return err
		}
		res, err := cdp.Call(ctx, tg, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
			Options: &webauthn.VirtualAuthenticatorOptions{
				Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21,
				Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true,
				HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
			},
		})
		id = res.AuthenticatorID
		return err
	}))
	if err != nil {
		t.Fatalf("virtual authenticator: %v", err)
	}
	return id
}

// TestPasskeyInChromium: a person signed in with a password adds a
// passkey from the consent page (a virtual authenticator makes it); then,
// signed out (cookies cleared), they sign in with the passkey alone,
// named by it, and reach the consent page as themselves. A passkey the
// gateway does not know (another authenticator's) is refused.
func TestPasskeyInChromium(t *testing.T) {
	path := chromium(t)
	v := viewports[0]
	bf := newBrowserFixture(t)
	ctx := startChromium(t, path, v)
	virtualAuthenticator(t, ctx)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(bf.url+bf.l.url("/oauth/login", bf.req.ID)),
		chromedp.SendKeys(chromedp.CSS(`#username`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`#password`), "correct horse"),
		chromedp.Submit(chromedp.CSS(`#password`)),
		chromedp.WaitVisible(chromedp.CSS(`button[value=allow]`)),
		chromedp.Click(chromedp.CSS(`a[href*="/oauth/passkeys"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[data-passkey=create] button`)),
	); err != nil {
		t.Fatalf("to the passkeys page: %v\n%s", err, bf.log.String())
	}
	shot(t, ctx, v, "passkeys")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`form[data-passkey=create] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	); err != nil {
		t.Fatalf("add a passkey: %v\n%s", err, bf.log.String())
	}
	if got := pageText(t, ctx, `.notice`); !strings.Contains(got, "Passkey added") {
		t.Errorf("notice %q", got)
	}
	shot(t, ctx, v, "passkey-added")
	keys, err := bf.s.store.Passkeys(context.Background(), "alice")
	if err != nil || len(keys) != 1 {
		t.Fatalf("alice's passkeys: %d, %v", len(keys), err)
	}

	// Signed out: the passkey alone signs alice in.
	second := bf.request(t)
	if err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
			return err
		}),
		chromedp.Navigate(bf.url+bf.l.url("/oauth/login", second.ID)),
		chromedp.WaitVisible(chromedp.CSS(`form[data-passkey=get] button`)),
		chromedp.Click(chromedp.CSS(`form[data-passkey=get] button`)),
		chromedp.WaitVisible(chromedp.CSS(`button[value=allow]`)),
	); err != nil {
		t.Fatalf("sign in with the passkey: %v\n%s", err, bf.log.String())
	}
	if got := pageText(t, ctx, `.foot`); !strings.Contains(got, "Signed in as alice") {
		t.Errorf("after the passkey: %q", got)
	}
	if !strings.Contains(bf.log.String(), `msg="authserver: signed in" user=alice method=passkey`) {
		t.Errorf("passkey sign-in not logged:\n%s", bf.log.String())
	}

	// A passkey the gateway no longer knows (the authenticator still
	// offers it) is refused.
	third := bf.request(t)
	if err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
			return err
		}),
	); err != nil {
		t.Fatal(err)
	}
	// Forget alice's passkey on the gateway's side: the authenticator
	// still offers it.
	ms := bf.s.store.(*memStore)
	ms.mu.Lock()
	ms.passkeys["alice"] = nil
	ms.mu.Unlock()
	bf.registerPasskey(t, "bob") // someone still has one: the button stays
	if err := chromedp.Do(ctx,
		chromedp.Navigate(bf.url+bf.l.url("/oauth/login", third.ID)),
		chromedp.WaitVisible(chromedp.CSS(`form[data-passkey=get] button`)),
		chromedp.Click(chromedp.CSS(`form[data-passkey=get] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.alert`)),
	); err != nil {
		t.Fatalf("unknown passkey: %v\n%s", err, bf.log.String())
	}
	if got := pageText(t, ctx, `.alert`); !strings.Contains(got, "That passkey did not work") {
		t.Errorf("unknown passkey: alert %q", got)
	}
}
