package gateway

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
