package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// These tests start a shared server the way a first `npx -y` does: slowly
// (the fake is held at a named pipe the test opens, not by a sleep), or
// dying of a Node stack trace.

// initBody is a client's initialize.
const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

// A client's initialize that arrives during a shared server's first start
// waits for it (up to initTimeout), instead of failing with "still
// starting" after the request timeout, and gets a session once the server
// is up.
func TestFirstStartSlowServerInitializeWaits(t *testing.T) {
	gate := testkit.NewGate(t)
	s := fakeServer("slow", testkit.FakeOptions{StartGate: gate.Path})
	// Before initTimeout governed the first start, a request waited at
	// most its own timeout: 1 ms here, far less than any start takes.
	s.Timeout = time.Millisecond
	s.InitTimeout = time.Minute
	g := startGateway(t, newConfig(s))

	done := make(chan *reply, 1)
	go func() { done <- g.client("slow").post(t, initBody) }()
	gate.Open(t) // the "download" ends
	var r *reply
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("initialize not answered")
	}
	if m := r.final(t); r.Status != http.StatusOK || m.Error != nil || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: status %d, error %+v, session %q", r.Status, m.Error, r.Header.Get("Mcp-Session-Id"))
	}
}

// A shared server whose first start dies of a Node stack trace answers a
// client's initialize with 503, a Retry-After, and the line that names the
// cause, not the trace's last lines.
func TestFirstStartCrashNamesCause(t *testing.T) {
	trace := []string{
		"node:internal/modules/esm/resolve:873",
		"  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);",
		"        ^",
		"",
		"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod' imported from /srv/mcp/dist/index.js",
		"    at packageResolve (node:internal/modules/esm/resolve:873:9)",
		"    at moduleResolve (node:internal/modules/esm/resolve:946:18)",
		"    at ModuleLoader.defaultResolve (node:internal/modules/esm/loader:642:12)",
		"    at async ModuleJob._link (node:internal/modules/esm/module_job:106:19) {",
		"  code: 'ERR_MODULE_NOT_FOUND'",
		"}",
		"",
		"Node.js v22.3.0",
	}
	s := fakeServer("broken", testkit.FakeOptions{Stderr: strings.Join(trace, "\n"), ExitAtStart: 1})
	g := startGateway(t, newConfig(s))
	r := g.client("broken").post(t, initBody)
	m := r.final(t)
	if r.Status != http.StatusServiceUnavailable || m.Error == nil {
		t.Fatalf("initialize: status %d, message %s; want 503 and an error", r.Status, r.Msgs[0])
	}
	if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("Retry-After %q, want whole seconds", r.Header.Get("Retry-After"))
	}
	if r.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("a failed initialize got a session")
	}
	cause := fmt.Sprintf("%q", trace[4])
	if !strings.Contains(m.Error.Message, cause) || strings.Contains(m.Error.Message, "Node.js") {
		t.Errorf("error %q: want the cause line %s, not the trace's tail", m.Error.Message, cause)
	}
}
