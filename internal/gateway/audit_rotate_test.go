package gateway

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// fileHas reports whether the file at path holds s.
func fileHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// auditCall makes call id on c and waits until its audit line is in the
// file at path.
func auditCall(t *testing.T, c *mcpClient, path string, id int) {
	t.Helper()
	if r := c.post(t, callBody(fmt.Sprint(id), "echo", map[string]string{"message": "hi"}, "")); r.Status != http.StatusOK {
		t.Fatalf("call %d: %d %s", id, r.Status, r.Body)
	}
	testkit.WaitFor(t, fmt.Sprintf("call %d's audit line in %s", id, filepath.Base(path)), func() bool {
		return fileHas(path, fmt.Sprintf(`"id":%d,`, id))
	})
}

// TestAuditFileRotated: logrotate's default (rename, then the writer
// creates the file) and a removal: the lines after each land in a new file
// at the configured path, and the reopens are counted.
func TestAuditFileRotated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Audit = &config.Audit{File: path}
	g := startGateway(t, cfg)
	c := g.client("fake")
	c.connect(t)
	auditCall(t, c, path, 1)

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	auditCall(t, c, path, 2)
	if !fileHas(path+".1", `"id":1,`) || fileHas(path+".1", `"id":2,`) || fileHas(path, `"id":1,`) {
		t.Errorf("after the rename: the old file should hold call 1 only, the new one call 2 only")
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	auditCall(t, c, path, 3)
	if fileHas(path, `"id":2,`) {
		t.Error("after the removal the new file holds call 2")
	}
	wantMetric(t, g.scrape(t), "mcpgate_audit_reopens_total", nil, 2)
}

// TestAuditReopenedOnSIGHUP: SIGHUP (ReloadOptions.Trigger) reopens the
// audit log before its next write, for rotation tools configured to send
// it (logrotate's postrotate), and logs it.
func TestAuditReopenedOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Audit = &config.Audit{File: path}
	trigger := make(chan os.Signal)
	reloaded := make(chan error, 1)
	g, logs := startReloading(t, cfg, ReloadOptions{
		Trigger:  trigger,
		Load:     func() (*config.Config, error) { return cloneConfig(cfg), nil },
		Reloaded: func(_ ReloadSummary, err error) { reloaded <- err },
	})
	c := g.client("fake")
	c.connect(t)
	auditCall(t, c, path, 1)
	wantMetric(t, g.scrape(t), "mcpgate_audit_reopens_total", nil, 0)

	trigger <- syscall.SIGHUP // a value on a channel: no signal is sent
	select {
	case err := <-reloaded:
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload after the trigger")
	}
	auditCall(t, c, path, 2)
	wantMetric(t, g.scrape(t), "mcpgate_audit_reopens_total", nil, 1)
	if len(logs.lines("reopening the audit log", "file="+path)) != 1 {
		t.Errorf("the reopen was not logged once:\n%s", logs.String())
	}
	if !fileHas(path, `"id":1,`) {
		t.Error("the reopened file lost call 1's line")
	}
}

// TestAuditWriteErrorsExported: an audit log on a full device (/dev/full)
// does not stop the gateway; its failed writes and lost lines are counted
// in /metrics and logged.
func TestAuditWriteErrorsExported(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Audit = &config.Audit{File: "/dev/full"}
	g, logs := startReloading(t, cfg, ReloadOptions{})
	c := g.client("fake")
	c.connect(t)
	if r := c.post(t, callBody("1", "echo", map[string]string{"message": "hi"}, "")); r.Status != http.StatusOK {
		t.Fatalf("call with the audit log failing: %d %s", r.Status, r.Body)
	}
	fams := g.scrapeUntil(t, "the audit lines lost", func(fams map[string]*dto.MetricFamily) bool {
		n, _ := metricValue(fams, "mcpgate_audit_lost_total", nil)
		return n >= 2 // initialize and the call
	})
	if n, _ := metricValue(fams, "mcpgate_audit_write_errors_total", nil); n < 1 {
		t.Errorf("mcpgate_audit_write_errors_total = %v, want at least 1", n)
	}
	wantMetric(t, fams, "mcpgate_audit_dropped_total", nil, 0)
	if len(logs.lines("level=ERROR", "audit log write failed", "file=/dev/full")) == 0 {
		t.Errorf("the write error was not logged:\n%s", logs.String())
	}
}
