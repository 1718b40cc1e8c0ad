package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// `mcpgate serve -- COMMAND` serves its one server at /mcp as well as at
// /servers/default/mcp: the config serve builds, run by the real gateway
// with a real child (the fake MCP server), answers a session opened at
// /mcp with the call's own id, and the legacy transport at /sse points at
// /messages.
func TestServeCommandAtBareMCP(t *testing.T) {
	call := stubGateway(t, nil)
	cmd, args, env := testkit.Command(testkit.FakeOptions{})
	if r := runCLI(append([]string{"serve", "--listen", "127.0.0.1:0", "--", cmd}, args...)...); r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	cfg := call.cfg
	srvCfg := cfg.Servers["default"]
	srvCfg.Env = map[string]string{}
	for _, kv := range env { // the fake's options: children get a minimal environment
		k, v, _ := strings.Cut(kv, "=")
		srvCfg.Env[k] = v
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gateway.Serve(ctx, ln, cfg, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the gateway did not stop")
		}
	})
	base := "http://" + ln.Addr().String()

	post := func(path, sid, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := post("/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || !strings.Contains(body, testkit.FakeServerName) {
		t.Fatalf("initialize at /mcp: %d %s", resp.StatusCode, body)
	}
	if resp, body := post("/mcp", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	resp, body = post("/mcp", sid, `{"jsonrpc":"2.0","id":"bare-\u00e9-99999999999999999999","method":"tools/list"}`)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":"bare-\u00e9-99999999999999999999","result":`) {
		t.Fatalf("tools/list at /mcp: %d %s", resp.StatusCode, body)
	}
	// The same session is the server's: its own URL takes it too.
	if resp, body := post("/servers/default/mcp", sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":2`) {
		t.Fatalf("ping at /servers/default/mcp: %d %s", resp.StatusCode, body)
	}

	// The legacy transport at /sse names /messages.
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	sresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	buf := make([]byte, 512)
	n, _ := io.ReadAtLeast(sresp.Body, buf, len("event: endpoint\ndata: /messages?sessionId="))
	if sresp.StatusCode != http.StatusOK || !strings.Contains(string(buf[:n]), "data: /messages?sessionId=") {
		t.Fatalf("GET /sse: %d %q", sresp.StatusCode, buf[:n])
	}
}

// TestServeCommandProcesses: `serve --processes N -- COMMAND` gives its
// one server a pool of N processes; the flag is refused without a
// COMMAND (a config file sets the key) and out of range, naming it.
func TestServeCommandProcesses(t *testing.T) {
	call := stubGateway(t, nil)
	if r := runCLI("serve", "--processes", "3", "--", "some-server", "--flag"); r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	if s := call.cfg.Servers["default"]; s == nil || s.Processes != 3 || s.Command != "some-server" {
		t.Fatalf("server %+v, want some-server with 3 processes", s)
	}
	if r := runCLI("serve", "--", "some-server"); r.code != 0 || call.cfg.Servers["default"].Processes != 1 {
		t.Errorf("without --processes: code %d, processes %d, want the default 1", r.code, call.cfg.Servers["default"].Processes)
	}
	cfgPath := writeFile(t, "mcpgate.json", `{"mcpServers": {"a": {"command": "x"}}}`)
	for _, args := range [][]string{
		{"serve", "--processes", "2", "--config", cfgPath},
		{"serve", "--processes", "0", "--", "x"},
		{"serve", "--processes", "65", "--", "x"},
		{"serve", "--processes", "-1", "--", "x"},
	} {
		r := runCLI(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--processes") {
			t.Errorf("%q: code %d, stderr %q; want a usage error naming --processes", args, r.code, r.stderr)
		}
	}
}
