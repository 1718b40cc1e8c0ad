package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gatewayConfig is the gateway's config file, as far as these tests use it.
type gatewayConfig struct {
	MCPServers map[string]serverConfig `json:"mcpServers"`
	Gateway    map[string]any          `json:"gateway,omitempty"`
}

// serverConfig is one entry of "mcpServers".
type serverConfig struct {
	Type      string            `json:"type,omitempty"`
	URL       string            `json:"url,omitempty"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Isolation string            `json:"isolation,omitempty"`
	Protocol  string            `json:"protocol,omitempty"`
	Processes int               `json:"processes,omitempty"`
}

// listeningAddr finds the address in the gateway's "msg=listening" log line (slog text format;
// the value may be quoted).
var listeningAddr = regexp.MustCompile(`\baddr="?([^\s"]+)`)

const (
	gatewayStartTimeout = 30 * time.Second
	gatewayStopTimeout  = 20 * time.Second
)

// startGateway runs the real gateway binary with cfg as its config file, listening on a free
// loopback port, and returns its base URL ("http://127.0.0.1:PORT"). The gateway's log goes to
// t.Log. At cleanup it gets SIGTERM and must drain and exit with status 0 within 20s, leaving no
// child process holding its output.
func startGateway(t *testing.T, cfg any) (baseURL string) {
	t.Helper()
	return startGatewayOn(t, cfg, "127.0.0.1:0")
}

// startGatewayOn is startGateway listening on listen, for a test that must name the gateway's
// URL before it starts (an authorization server bound to the gateway's resource URL).
func startGatewayOn(t *testing.T, cfg any, listen string) (baseURL string) {
	t.Helper()
	return startGatewayFile(t, writeGatewayConfig(t, cfg), listen)
}

// writeGatewayConfig writes cfg as JSON into a new file of the test's temporary directory and
// returns its path.
func writeGatewayConfig(t testing.TB, cfg any) string {
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

// startGatewayFile is startGatewayOn with the config file at path, which the gateway watches:
// a test that rewrites it reloads the gateway.
func startGatewayFile(t *testing.T, path, listen string) (baseURL string) {
	t.Helper()
	bin := gatewayBinary(t)
	listening := make(chan string, 1)
	cmd := exec.Command(bin, "serve", "--config", path, "--listen", listen)
	p := startProcess(t, "mcpgate", cmd, func(line string) {
		if !strings.Contains(line, "msg=listening") {
			return
		}
		if m := listeningAddr.FindStringSubmatch(line); m != nil {
			select {
			case listening <- m[1]:
			default:
			}
		}
	})
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM, gatewayStopTimeout, true) })

	select {
	case addr := <-listening:
		return "http://" + addr
	case <-p.exited:
		t.Fatalf("gateway exited before listening: %v", p.waitErr)
	case <-time.After(gatewayStartTimeout):
		t.Fatalf("gateway printed no msg=listening line within %v", gatewayStartTimeout)
	}
	panic("unreachable")
}
