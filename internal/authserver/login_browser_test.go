package authserver

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpgate/mcpgate/internal/config"
)

// The login pages in headless Chromium: signing in and consenting
// through the real pages, at a desktop's and a phone's width, with a
// screenshot of every page left for a person to look at.

// chromium returns the headless browser to drive: $MCPGATE_CHROMIUM, or
// Debian's /usr/bin/chromium (scripts/peers.sh installs it). Without one
// the test skips, saying so; under CI it fails instead, as
// internal/gateway's browser tests do.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("MCPGATE_CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	msg := "no chromium (set MCPGATE_CHROMIUM, or run scripts/peers.sh as root to apt-get install chromium)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// screenshotDir is where the screenshots go (git-ignored).
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCPGATE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".cache", "artifacts")
	}
	dir = filepath.Join(dir, "authserver")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// viewport is a browser window's size: a desktop's, or a phone's (with
// touch and mobile emulation).
type viewport struct {
	name          string
	width, height int64
	phone         bool
}

var viewports = []viewport{{"desktop", 1280, 860, false}, {"phone", 390, 844, true}}

// startChromium starts headless Chromium at v's size, bounded to 60 s.
func startChromium(t *testing.T, path string, v viewport) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(v.width), int(v.height)),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(cancel)
	vopts := []chromedp.EmulateViewportOption{}
	if v.phone {
		vopts = append(vopts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(3))
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(v.width, v.height, vopts...)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return ctx
}

// browserFixture is a login fixture served on http://localhost:PORT
// (a domain, so passkeys are on), with its client's redirect URI on a
// second local server that records the callbacks.
type browserFixture struct {
	*loginFixture
	url       string
	callbacks chan string
}

func newBrowserFixture(t *testing.T) *browserFixture {
	t.Helper()
	return newBrowserFixtureWith(t, nil)
}

// newBrowserFixtureWith is newBrowserFixture with edit applied to the
// config.
func newBrowserFixtureWith(t *testing.T, edit func(*config.AuthServer)) *browserFixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://localhost:" + listenerPort(ln.Addr())
	bf := &browserFixture{loginFixture: newLoginFixture(t, issuer, edit), url: issuer, callbacks: make(chan string, 10)}
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r) // the browser's /favicon.ico
			return
		}
		bf.callbacks <- r.URL.RawQuery
		_, _ = w.Write([]byte(`<!doctype html><title>Client</title><h1 id="client">Back at the client</h1>`))
	}))
	t.Cleanup(cb.Close)
	c, err := bf.s.store.Client(context.Background(), "client-1")
	if err != nil {
		t.Fatal(err)
	}
	c.RedirectURIs = []string{cb.URL + "/callback"}
	if err := bf.s.store.PutClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: bf.s.Handler()}}
	srv.Start()
	t.Cleanup(srv.Close)
	bf.req = bf.request(t)
	return bf
}

// request stores a fresh request whose redirect URI is the callback
// server's.
func (bf *browserFixture) request(t *testing.T) *AuthRequest {
	t.Helper()
	c, err := bf.s.store.Client(context.Background(), "client-1")
	if err != nil {
		t.Fatal(err)
	}
	req := bf.newRequest(t)
	req.RedirectURI = c.RedirectURIs[0]
	if err := bf.s.store.PutAuthRequest(context.Background(), req, loginRequestLife); err != nil {
		t.Fatal(err)
	}
	return req
}

func listenerPort(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}

// shot saves a full-page screenshot as NAME-VIEWPORT.png.
func shot(t *testing.T, ctx context.Context, v viewport, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(screenshotDir(t), name+"-"+v.name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// submitAndWait submits the form of the element sel and waits for the page
// that answers it: the page being left is marked, so an element it has
// too (an alert, a heading) is not taken for the answer's.
func submitAndWait(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.dataset.left = "1"; true`)); err != nil {
			return err
		}
		return chromedp.Do(ctx,
			chromedp.Submit(chromedp.CSS(sel)),
			chromedp.WaitReady(chromedp.CSS(`body:not([data-left])`)),
		)
	})
}

// pageText returns the text of the element sel.
func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// TestSignInAndConsentInChromium: at each width, a person signs in
// (first with a wrong password: the page says so), reads the consent
// page (client, its host, the redirect host, the server and its URL, the
// scope), allows, and lands on the client's callback with the code;
// a second request in the same browser skips the sign-in and is denied.
// Every page is screenshotted.
func TestSignInAndConsentInChromium(t *testing.T) {
	path := chromium(t)
	for _, v := range viewports {
		t.Run(v.name, func(t *testing.T) {
			bf := newBrowserFixture(t)
			ctx := startChromium(t, path, v)
			login := bf.url + bf.l.url("/oauth/login", bf.req.ID)
			if err := chromedp.Do(ctx,
				chromedp.Navigate(login),
				chromedp.WaitVisible(chromedp.CSS(`#username`)),
			); err != nil {
				t.Fatalf("sign-in page: %v", err)
			}
			shot(t, ctx, v, "signin")
			if err := chromedp.Do(ctx,
				chromedp.SendKeys(chromedp.CSS(`#username`), "alice"),
				chromedp.SendKeys(chromedp.CSS(`#password`), "wrong horse"),
				submitAndWait(`#password`),
				chromedp.WaitVisible(chromedp.CSS(`.alert`)),
			); err != nil {
				t.Fatalf("wrong password: %v\n%s", err, bf.log.String())
			}
			if got := pageText(t, ctx, `.alert`); !strings.Contains(got, "Wrong user name or password") {
				t.Errorf("alert %q", got)
			}
			shot(t, ctx, v, "signin-error")
			if err := chromedp.Do(ctx,
				chromedp.SendKeys(chromedp.CSS(`#password`), "correct horse"),
				chromedp.Submit(chromedp.CSS(`#password`)),
				chromedp.WaitVisible(chromedp.CSS(`button[value=allow]`)),
			); err != nil {
				t.Fatalf("sign-in: %v\n%s", err, bf.log.String())
			}
			shot(t, ctx, v, "consent")
			page := pageText(t, ctx, `main`)
			for _, want := range []string{loginClientName, "claude.ai", "127.0.0.1:", "the memory server", loginResource, "mcp", "alice"} {
				if !strings.Contains(page, want) {
					t.Errorf("consent page lacks %q:\n%s", want, page)
				}
			}
			if err := chromedp.Do(ctx,
				chromedp.Click(chromedp.CSS(`button[value=allow]`)),
				chromedp.WaitVisible(chromedp.CSS(`#client`)),
			); err != nil {
				t.Fatal(err)
			}
			if q := bf.callback(t); !strings.Contains(q, "code=test") {
				t.Errorf("callback %q, want the code", q)
			}
			bf.ended.mu.Lock()
			if len(bf.ended.finished) != 1 || bf.ended.finished[0].User != "alice" || !bf.ended.finished[0].Consented {
				t.Errorf("finish calls: %+v", bf.ended.finished)
			}
			bf.ended.mu.Unlock()

			// The same browser, a new request: straight to the consent page.
			second := bf.request(t)
			if err := chromedp.Do(ctx,
				chromedp.Navigate(bf.url+bf.l.url("/oauth/login", second.ID)),
				chromedp.WaitVisible(chromedp.CSS(`button[value=deny]`)),
				chromedp.Click(chromedp.CSS(`button[value=deny]`)),
				chromedp.WaitVisible(chromedp.CSS(`#client`)),
			); err != nil {
				t.Fatalf("second request: %v", err)
			}
			if q := bf.callback(t); !strings.Contains(q, "error=access_denied") {
				t.Errorf("callback %q, want access_denied", q)
			}

			// An expired request's page.
			if err := chromedp.Do(ctx,
				chromedp.Navigate(bf.url+bf.l.url("/oauth/login", "gone")),
				chromedp.WaitVisible(chromedp.CSS(`h1`)),
			); err != nil {
				t.Fatal(err)
			}
			if got := pageText(t, ctx, `h1`); !strings.Contains(got, "expired") {
				t.Errorf("expired page: %q", got)
			}
			shot(t, ctx, v, "error")
		})
	}
}

// callback waits for the client's callback to be called.
func (bf *browserFixture) callback(t *testing.T) string {
	t.Helper()
	select {
	case q := <-bf.callbacks:
		return q
	case <-time.After(30 * time.Second):
		t.Fatalf("the browser never reached the client's callback\n%s", bf.log.String())
		return ""
	}
}

// TestSignInCodeInChromium: at each width, a gateway with no users
// offers the one-time code from its log; wrong codes typed until the
// throttle stops them get the 429 page; once the delay has passed, the
// code (typed in lower case) signs the owner in.
func TestSignInCodeInChromium(t *testing.T) {
	path := chromium(t)
	for _, v := range viewports {
		t.Run(v.name, func(t *testing.T) {
			bf := newBrowserFixtureWith(t, func(c *config.AuthServer) { c.Users = nil; c.SignInCode = true })
			code := regexp.MustCompile(`[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}`).FindString(bf.log.String())
			ctx := startChromium(t, path, v)
			login := bf.url + bf.l.url("/oauth/login", bf.req.ID)
			if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`#code`))); err != nil {
				t.Fatal(err)
			}
			shot(t, ctx, v, "signin-code")
			for i := range throttleFree {
				if err := chromedp.Do(ctx,
					chromedp.SendKeys(chromedp.CSS(`#code`), "0000-0000-0000-000"+string(rune('0'+i))),
					submitAndWait(`#code`),
					chromedp.WaitVisible(chromedp.CSS(`.alert`)),
				); err != nil {
					t.Fatalf("wrong code %d: %v", i, err)
				}
			}
			if err := chromedp.Do(ctx,
				chromedp.SendKeys(chromedp.CSS(`#code`), strings.ToLower(code)),
				submitAndWait(`#code`),
			); err != nil {
				t.Fatal(err)
			}
			if got := pageText(t, ctx, `h1`); got != "Too many attempts" {
				t.Fatalf("after %d wrong codes: %q", throttleFree, got)
			}
			shot(t, ctx, v, "throttled")
			bf.clock.Advance(throttleDelay(throttleFree))
			if err := chromedp.Do(ctx,
				chromedp.Navigate(login),
				chromedp.SendKeys(chromedp.CSS(`#code`), strings.ToLower(code)),
				chromedp.Submit(chromedp.CSS(`#code`)),
				chromedp.WaitVisible(chromedp.CSS(`button[value=allow]`)),
			); err != nil {
				t.Fatalf("the code: %v\n%s", err, bf.log.String())
			}
			if got := pageText(t, ctx, `.foot`); !strings.Contains(got, "Signed in as owner") {
				t.Errorf("signed in: %q", got)
			}
		})
	}
}
