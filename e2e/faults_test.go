package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The fault scenarios that need the real binary: signals and exit codes.
// The rest of the fault-injection suite runs in-process, in
// internal/faults.

// init lets the gateway binary run this test binary as a fake or chaos
// MCP server (testkit re-exec); it returns at once in the test process.
func init() { testkit.Main() }

// fakeEntry is a config entry running this test binary as a server.
func fakeEntry(cmd string, args, env []string, extra map[string]any) map[string]any {
	e := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		e[k] = v
	}
	s := map[string]any{"command": cmd, "args": args, "env": e}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

// faultPost POSTs body to url and returns the status, headers and whole body.
func faultPost(t *testing.T, url, session, version, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func faultInitialize(version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"faults","version":"1"}}}`, version)
}

// faultSession initializes a session on url and returns its id.
func faultSession(t *testing.T, url, version string) string {
	t.Helper()
	status, h, body := faultPost(t, url, "", version, faultInitialize(version))
	id := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || id == "" {
		t.Fatalf("initialize %s: status %d, body %.300s", url, status, body)
	}
	if status, _, _ := faultPost(t, url, id, version, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d", status)
	}
	return id
}

// TestFaultSIGTERMWithStuckServers: SIGTERM while one server has stopped
// reading stdin with a full queue, and session-mode servers ignore SIGTERM
// and stdin EOF with calls in flight. The gateway exits with status 0
// within drainTimeout + a bounded stop time, leaving no process behind.
func TestFaultSIGTERMWithStuckServers(t *testing.T) {
	mark := fmt.Sprintf("e2e-fault-sigterm-%d", time.Now().UnixNano())
	stuckCmd, stuckArgs, stuckEnv := testkit.ChaosCommand(testkit.ChaosOptions{Marker: mark, StopReadingAfter: 1, IgnoreSIGTERM: true, SpawnGrandchild: true})
	isoCmd, isoArgs, isoEnv := testkit.Command(testkit.FakeOptions{Marker: mark, IgnoreSIGTERM: true, IgnoreStdinEOF: true, SpawnGrandchild: true})
	const drain = 2 * time.Second
	cfg := map[string]any{
		"gateway": map[string]any{"drainTimeout": drain.String()},
		"mcpServers": map[string]any{
			"stuck": fakeEntry(stuckCmd, stuckArgs, stuckEnv, map[string]any{"timeout": "60s"}),
			"iso":   fakeEntry(isoCmd, isoArgs, isoEnv, map[string]any{"isolation": "session", "timeout": "60s"}),
		},
	}
	p, base := startFaultGateway(t, cfg)

	var wg sync.WaitGroup
	defer wg.Wait()
	stuck := faultSession(t, base+"/servers/stuck/mcp", "2025-03-26")
	parts := make([]string, 1200)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":%q}}}`, i+1, strings.Repeat("p", 512))
	}
	wg.Go(func() { faultPost(t, base+"/servers/stuck/mcp", stuck, "2025-03-26", "["+strings.Join(parts, ",")+"]") })
	for range 3 {
		id := faultSession(t, base+"/servers/iso/mcp", "2025-11-25")
		wg.Go(func() {
			faultPost(t, base+"/servers/iso/mcp", id, "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":600000}}}`)
		})
	}
	if n := len(testkit.Procs(mark)); n < 4 {
		t.Fatalf("%d fake processes running, want at least 4", n)
	}
	time.Sleep(500 * time.Millisecond) // let the batch reach the full queue; shutdown must cope either way

	// Every process is stopped in parallel: at most 2 x the 2s stop grace.
	bound := drain + 4*time.Second + 4*time.Second
	start := time.Now()
	p.stop(t, syscall.SIGTERM, bound, true)
	t.Logf("SIGTERM to exit: %v (bound %v)", time.Since(start).Round(time.Millisecond), bound)
	if live := testkit.WaitProcsGone(mark, 5*time.Second); len(live) > 0 {
		t.Errorf("processes left after the gateway exited: %v", live)
	}
}

// startFaultGateway runs the gateway binary on cfg like startGateway, but
// leaves stopping it to the test (which measures it); cleanup only kills
// what is left.
func startFaultGateway(t *testing.T, cfg any) (*process, string) {
	t.Helper()
	bin := gatewayBinary(t)
	path := writeFaultConfig(t, cfg)
	listening := make(chan string, 1)
	cmd := exec.Command(bin, "serve", "--config", path, "--listen", "127.0.0.1:0")
	p := startProcess(t, "mcpgate", cmd, func(line string) {
		if m := listeningAddr.FindStringSubmatch(line); m != nil && strings.Contains(line, "msg=listening") {
			select {
			case listening <- m[1]:
			default:
			}
		}
	})
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.stop(t, syscall.SIGKILL, 5*time.Second, false)
		}
	})
	select {
	case addr := <-listening:
		return p, "http://" + addr
	case <-p.exited:
		t.Fatalf("gateway exited before listening: %v", p.waitErr)
	case <-time.After(gatewayStartTimeout):
		t.Fatalf("gateway printed no msg=listening line within %v", gatewayStartTimeout)
	}
	panic("unreachable")
}

func writeFaultConfig(t *testing.T, cfg any) string {
	t.Helper()
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcpgate.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("gateway config %s:\n%s", path, data)
	return path
}

// TestFaultMissingCommandServesOthers: a config with a uvx entry on a
// machine without uv still serves its other servers; the missing one's
// client gets an error naming the command. Cleanup checks the clean exit.
func TestFaultMissingCommandServesOthers(t *testing.T) {
	mark := fmt.Sprintf("e2e-fault-missing-%d", time.Now().UnixNano())
	okCmd, okArgs, okEnv := testkit.Command(testkit.FakeOptions{Marker: mark})
	const missing = "mcpgate-e2e-no-such-uvx"
	base := startGateway(t, map[string]any{"mcpServers": map[string]any{
		"fetch": map[string]any{"command": missing, "args": []string{"mcp-server-fetch"}},
		"ok":    fakeEntry(okCmd, okArgs, okEnv, nil),
	}})
	id := faultSession(t, base+"/servers/ok/mcp", "2025-11-25")
	status, _, body := faultPost(t, base+"/servers/ok/mcp", id, "2025-11-25",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"still served"}}}`)
	if status != http.StatusOK || !strings.Contains(body, "still served") {
		t.Errorf("the other server: status %d, body %.300s", status, body)
	}
	status, h, body := faultPost(t, base+"/servers/fetch/mcp", "", "2025-11-25", faultInitialize("2025-11-25"))
	if !strings.Contains(body, `"error"`) || !strings.Contains(body, "command not found") || !strings.Contains(body, missing) {
		t.Errorf("the missing server's client: status %d, body %.300s, want a JSON-RPC error naming %s", status, body, missing)
	}
	if sid := h.Get("Mcp-Session-Id"); sid != "" {
		t.Errorf("failed initialize carries Mcp-Session-Id %q", sid)
	}
}
