package gateway

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/mcpgate/mcpgate/internal/authserver"
	"github.com/mcpgate/mcpgate/internal/config"
)

// chromium returns the headless browser to drive: $MCPGATE_CHROMIUM, or
// Debian's /usr/bin/chromium (scripts/peers.sh installs it when it runs as
// root with apt-get, as on CI). Without one the test skips, saying so;
// under CI (CI set, as for the e2e peers) it fails instead: a CI run that
// silently skipped it would prove nothing.
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

// artifactDir is where tests leave files for a human (git-ignored).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCPGATE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".cache", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// browse starts headless Chromium (browser) for the test and returns
// its context, bounded to 60 s.
func browse(t *testing.T, browser string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestStatusPageInChromium loads /status in headless Chromium with the
// token in the URL once (the cookie then carries it), waits until the
// shared server shows "ready" with its pid and tools and the session
// appears, checks that the server's hostile stderr is shown as text (no
// element made of it), and saves a screenshot.
func TestStatusPageInChromium(t *testing.T) {
	g := startGateway(t, adminConfig())
	c := g.client("shared")
	c.connect(t)

	ctx := browse(t, chromium(t))
	err := chromedp.Do(ctx,
		chromedp.Navigate(g.URL+"/status?token="+adminToken),
		chromedp.WaitVisible(chromedp.CSS(`#servers tr[data-server="shared"] td.ready`)),
		chromedp.WaitVisible(chromedp.CSS(`#servers tr[data-server="shared"] td.tools`)),
		chromedp.WaitVisible(chromedp.CSS(`#sessions tr[data-session]`)),
	)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	servers, sessions, rate := text(`#servers tbody`), text(`#sessions tbody`), text(`#rate`)
	images, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
	if err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactDir(t), "status.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	for _, want := range []string{"shared", "ready", "echo", "iso", "per session", "<img src=x onerror=alert(1)> started"} {
		if !strings.Contains(servers, want) {
			t.Errorf("servers table lacks %q:\n%s", want, servers)
		}
	}
	if !strings.Contains(sessions, c.session[:8]) || strings.Contains(sessions, c.session) || !strings.Contains(sessions, "2025-11-25") {
		t.Errorf("sessions table:\n%s", sessions)
	}
	if images != 0 {
		t.Errorf("the page has %d <img> elements: stderr was parsed as HTML", images)
	}
	if rate == "" {
		t.Errorf("no rate shown")
	}
}

// TestStatusPageClusterInChromium: a replica's status page says which
// replica it shows, how many are live and whether Redis answers, and the
// owner of each session.
func TestStatusPageClusterInChromium(t *testing.T) {
	browser := chromium(t)
	g := startGateway(t, inCluster(t, adminConfig(), "127.0.0.1:1"))
	c := g.client("shared")
	c.connect(t)
	ctx := browse(t, browser)
	err := chromedp.Do(ctx,
		chromedp.Navigate(g.URL+"/status?token="+adminToken),
		chromedp.WaitVisible(chromedp.CSS(`#cluster`)),
		chromedp.WaitVisible(chromedp.CSS(`#sessions tr[data-session] td.owner`)),
	)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := func(a chromedp.Action[string]) string {
		t.Helper()
		s, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	bar, owner := text(chromedp.Text(chromedp.CSS(`#cluster`))), text(chromedp.Text(chromedp.CSS(`#sessions tr[data-session] td.owner`)))
	title := text(chromedp.Evaluate[string](`document.title`))
	if bar != "replica pod-a at 127.0.0.1:1 of 1 live, Redis up" || title != "mcpgate status: pod-a" {
		t.Errorf("cluster bar %q, title %q", bar, title)
	}
	if owner != "this replica owner-bound" {
		t.Errorf("owner cell %q", owner)
	}
}

// TestStatusPageOAuthInChromium: with the gateway's authorization server
// on, the status page lists its clients and grants (no hash of a secret
// shown), and its buttons, once their confirmation is accepted, revoke a
// grant and delete a client (its grants with it) in the store.
func TestStatusPageOAuthInChromium(t *testing.T) {
	browser := chromium(t)
	ctx := context.Background()
	now := time.Now()
	store, err := authserver.OpenStore(ctx, config.AuthServer{AccessTokenTTL: time.Minute}, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const resource = "https://gw.example/servers/memory/mcp"
	secret := authserver.Hash{0xde, 0xad, 0xbe, 0xef}
	for _, c := range []*authserver.Client{
		{ID: "c1", Name: "Claude", URI: "https://claude.ai", RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"}, SecretHash: secret, AuthMethod: "client_secret_post", CreatedAt: now},
		{ID: "https://app.example/client.json", Name: "Doc App", AuthMethod: "none", Document: true, CreatedAt: now.Add(time.Second)},
	} {
		if err := store.PutClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []*authserver.Grant{
		{ID: "g1", User: "ann", ClientID: "c1", Resource: resource, Scopes: []string{"mcp"}, CreatedAt: now, LastUsed: now, Refresh: secret, Expires: now.Add(time.Hour)},
		{ID: "g2", User: "bob", ClientID: "https://app.example/client.json", Resource: resource, Scopes: []string{"mcp"}, CreatedAt: now, LastUsed: now, Refresh: authserver.Hash{1}, Expires: now.Add(time.Hour)},
	} {
		if err := store.PutGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	asCfg := config.NewAuthServer()
	asCfg.Issuer, asCfg.Scopes = "https://gw.example", []string{"mcp"}
	srv, err := authserver.New(*asCfg, authserver.Deps{Store: store, Resources: func() []string { return []string{resource} }})
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, adminConfig())
	g.gw.authServer = srv
	ts := httptest.NewServer(g.gw.newAdmin())
	t.Cleanup(ts.Close)

	bctx := browse(t, browser)
	// Every confirmation the page asks is accepted, by a goroutine the
	// test waits for.
	dctx, stopDialogs := context.WithCancel(bctx)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(stopDialogs)
	dialogs := chromedp.Events(dctx, page.JavascriptDialogOpening)
	wg.Go(func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			if _, err := chromedp.Call(dctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("accepting a confirmation: %v", err)
			}
		}
	})

	if err := chromedp.Do(bctx,
		chromedp.Navigate(ts.URL+"/status?token="+adminToken),
		chromedp.WaitVisible(chromedp.CSS(`#oauthGrants tr[data-grant="g1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#oauthClients tr[data-client="c1"]`)),
	); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	clients, grants := text(`#oauthClients tbody`), text(`#oauthGrants tbody`)
	for _, want := range []string{"Claude", "confidential", "Doc App", "metadata document", "https://claude.ai/api/mcp/auth_callback"} {
		if !strings.Contains(clients, want) {
			t.Errorf("clients table lacks %q:\n%s", want, clients)
		}
	}
	for _, want := range []string{"ann", "bob", "Claude", resource} {
		if !strings.Contains(grants, want) {
			t.Errorf("grants table lacks %q:\n%s", want, grants)
		}
	}
	if strings.Contains(clients+grants, "deadbeef") || strings.Contains(clients+grants, "222,173") {
		t.Errorf("a hash is shown:\n%s\n%s", clients, grants)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactDir(t), "status-oauth.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#oauthGrants tr[data-grant="g1"] button`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#oauthGrants tr[data-grant="g1"]`)),
	); err != nil {
		t.Fatalf("revoking g1: %v", err)
	}
	if !store.Revoked("g1") {
		t.Error("the page's revoke did not revoke g1")
	}
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#oauthClients tr[data-client="https://app.example/client.json"] button`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#oauthClients tr[data-client="https://app.example/client.json"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#oauthGrants tr[data-grant="g2"]`)),
	); err != nil {
		t.Fatalf("deleting the document's client: %v", err)
	}
	if _, err := store.Client(ctx, "https://app.example/client.json"); !errors.Is(err, authserver.ErrNotFound) || !store.Revoked("g2") {
		t.Errorf("after the page's delete: client %v, g2 revoked %v", err, store.Revoked("g2"))
	}
	if msg := text(`#error`); msg != "" {
		t.Errorf("the page shows an error: %s", msg)
	}
}
