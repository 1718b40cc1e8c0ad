package testkit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns the headless browser for a test to drive:
// $MCPGATE_CHROMIUM, or Debian's /usr/bin/chromium (scripts/peers.sh
// installs it when it runs as root with apt-get, as on CI). Without one
// the test skips, saying so; under CI (CI set, as for the e2e peers) it
// fails instead: a CI run that silently skipped it would prove nothing.
func Chromium(t testing.TB) string {
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

// ArtifactDir is where tests leave files for a person to look at
// (screenshots): $MCPGATE_ARTIFACTS, or the repository's git-ignored
// .cache/artifacts, under sub when it is not "". A test of a package two
// levels under the root (internal/x) finds the default.
func ArtifactDir(t testing.TB, sub string) string {
	t.Helper()
	dir := os.Getenv("MCPGATE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".cache", "artifacts")
	}
	dir = filepath.Join(dir, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// Browse starts headless Chromium (the path Chromium returned) with a
// window of width x height for the test, and returns its context,
// bounded to 60 s; the browser ends with the test.
func Browse(t testing.TB, path string, width, height int) context.Context {
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
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
