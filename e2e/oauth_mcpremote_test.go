package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// mcp-remote, the stdio bridge many Claude Desktop users run, against the gateway's own
// authorization server (issue 21). It registers itself, prints the authorization URL (no
// browser here), and waits on its loopback callback; the test is the person at the browser.

// mcpRemote is the installed mcp-remote's entry point (scripts/peers.sh, .cache/mcp-remote).
func mcpRemote() string {
	return filepath.Join(repoRoot, ".cache", "mcp-remote", "node_modules", "mcp-remote", "dist", "proxy.js")
}

// authorizeLine finds the authorization URL mcp-remote prints.
var authorizeLine = regexp.MustCompile(`https?://\S+/oauth/authorize\?\S+`)

// TestOAuthServerMCPRemote: mcp-remote connects to a protected server of the gateway, is sent
// to authorize, and once the person has signed in and consented its loopback callback gets the
// code; then, through its stdio, initialize and tools/list reach the server with its token.
func TestOAuthServerMCPRemote(t *testing.T) {
	requirePeers(t, node22, mcpRemote(), everythingServer)
	g := startAuthGateway(t, nil)
	resource := g.resource("everything")
	_, port, err := net.SplitHostPort(testkit.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(node22, mcpRemote(), resource, port, "--host", "127.0.0.1", "--transport", "http-only")
	// Its tokens go to a directory of the test; BROWSER=true makes its browser launch a no-op.
	cmd.Env = append(os.Environ(), "MCP_REMOTE_CONFIG_DIR="+t.TempDir(), "BROWSER=true", "NO_COLOR=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait closes the pipes, so it runs once stderr is at its end (the process is gone): the
	// stderr reader logs to t until then, and the cleanup waits for it.
	stderrDone, exited, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		<-stderrDone
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		close(done)
		stdin.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	authorizeURL := make(chan string, 1)
	connected := make(chan struct{})
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		once := false
		for sc.Scan() {
			line := sc.Text()
			t.Logf("mcp-remote: %s", line)
			if u := authorizeLine.FindString(line); u != "" {
				select {
				case authorizeURL <- u:
				default:
				}
			}
			if strings.Contains(line, "Proxy established successfully") && !once {
				once = true
				close(connected)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
				return
			}
		}
	}()

	var u string
	select {
	case u = <-authorizeURL:
	case <-exited:
		t.Fatal("mcp-remote exited before asking for authorization")
	case <-time.After(60 * time.Second):
		t.Fatal("mcp-remote printed no authorization URL within 60s")
	}
	// The person: signs in and consents; the browser then goes to mcp-remote's callback.
	to := newUserAgent(t).authorize(t, u, g.base, e2eUser, e2ePassword)
	if to.Hostname() != "127.0.0.1" || to.Port() != port || to.Query().Get("code") == "" {
		t.Fatalf("the authorization sends the browser to %s, want mcp-remote's callback on 127.0.0.1:%s with a code", to, port)
	}
	resp, err := http.Get(to.String())
	if err != nil {
		t.Fatalf("delivering the code to mcp-remote's callback: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mcp-remote's callback: %d", resp.StatusCode)
	}

	select {
	case <-connected:
	case <-exited:
		t.Fatal("mcp-remote exited before connecting")
	case <-time.After(60 * time.Second):
		t.Fatal("mcp-remote did not connect within 60s of the callback")
	}

	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatalf("writing to mcp-remote: %v", err)
		}
	}
	// reply waits for the answer with id, skipping notifications.
	reply := func(id int) map[string]json.RawMessage {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("mcp-remote closed its stdout before answering %d", id)
				}
				var m map[string]json.RawMessage
				if json.Unmarshal([]byte(line), &m) != nil {
					t.Fatalf("mcp-remote wrote a line that is not JSON: %s", brief(line))
				}
				if string(m["id"]) == fmt.Sprint(id) {
					return m
				}
			case <-deadline:
				t.Fatalf("no answer to request %d within 60s", id)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e-mcp-remote","version":"1"}}}`)
	if m := reply(1); m["result"] == nil || !strings.Contains(string(m["result"]), `"serverInfo"`) {
		t.Fatalf("initialize through mcp-remote: %s", mustJSON(t, m))
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m := reply(2); !strings.Contains(string(m["result"]), `"test_simple_text"`) {
		t.Fatalf("tools/list through mcp-remote: %s", brief(string(mustJSON(t, m))))
	}
}
