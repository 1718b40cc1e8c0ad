package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestAuditLogRotation: the real binary's audit log through a logrotate
// cycle, as logrotate runs it: a real SIGHUP (its postrotate) reopens the
// file, and a rename without any signal (the default, no copytruncate)
// sends the next lines to a new file at the configured path, the old one
// keeping what it had.
func TestAuditLogRotation(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	mark := fmt.Sprintf("e2e-audit-%d", time.Now().UnixNano())
	cmd, args, env := testkit.Command(testkit.FakeOptions{Marker: mark})
	path := writeFaultConfig(t, map[string]any{
		"gateway":    map[string]any{"audit": map[string]any{"file": audit}},
		"mcpServers": map[string]any{"fake": fakeEntry(cmd, args, env, nil)},
	})

	listening := make(chan string, 1)
	hup := make(chan struct{}, 1)
	p := startProcess(t, "mcpgate", exec.Command(gatewayBinary(t), "serve", "--config", path, "--listen", "127.0.0.1:0"), func(line string) {
		if m := listeningAddr.FindStringSubmatch(line); m != nil && strings.Contains(line, "msg=listening") {
			select {
			case listening <- m[1]:
			default:
			}
		}
		if strings.Contains(line, `msg="reloading the config"`) && strings.Contains(line, "trigger=hangup") {
			select {
			case hup <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM, gatewayStopTimeout, true) })
	var base string
	select {
	case addr := <-listening:
		base = "http://" + addr
	case <-p.exited:
		t.Fatalf("gateway exited before listening: %v", p.waitErr)
	case <-time.After(gatewayStartTimeout):
		t.Fatalf("gateway printed no msg=listening line within %v", gatewayStartTimeout)
	}

	url := base + "/servers/fake/mcp"
	session := faultSession(t, url, "2025-11-25")
	call := func(id int, file string) {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`, id)
		if status, _, reply := faultPost(t, url, session, "2025-11-25", body); status != http.StatusOK {
			t.Fatalf("call %d: status %d %.300s", id, status, reply)
		}
		want := fmt.Sprintf(`"id":%d,`, id)
		testkit.WaitFor(t, fmt.Sprintf("call %d's audit line in %s", id, filepath.Base(file)), func() bool {
			b, err := os.ReadFile(file)
			return err == nil && strings.Contains(string(b), want)
		})
	}
	call(1, audit)

	// logrotate with "create" and a postrotate kill -HUP.
	if err := os.Rename(audit, audit+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(audit, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hup:
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not log the SIGHUP")
	}
	call(2, audit)

	// logrotate's default without a signal: rename only.
	if err := os.Rename(audit, audit+".2"); err != nil {
		t.Fatal(err)
	}
	call(3, audit)

	for file, want := range map[string]string{audit + ".1": `"id":1,`, audit + ".2": `"id":2,`, audit: `"id":3,`} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{`"id":1,`, `"id":2,`, `"id":3,`} {
			if strings.Contains(string(b), id) != (id == want) {
				t.Errorf("%s holds %s: %v; want only %s\n%s", filepath.Base(file), id, strings.Contains(string(b), id), want, b)
			}
		}
	}
}
