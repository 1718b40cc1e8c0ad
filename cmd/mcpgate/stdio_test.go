package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// stdioUpstream is a minimal Streamable HTTP server that records the
// headers it got.
type stdioUpstream struct {
	mu      sync.Mutex
	auth    []string
	deletes int
}

func (u *stdioUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.auth = append(u.auth, r.Header.Get("Authorization"))
	if r.Method == http.MethodDelete {
		u.deletes++
	}
	u.mu.Unlock()
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Parse(body)
	if err != nil || msg.Kind != jsonrpc.KindRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if msg.MethodIs("initialize") {
		w.Header().Set("Mcp-Session-Id", "abc")
	}
	w.Write(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{"protocolVersion":"2025-06-18","ok":true}`)))
}

// runStdio runs `mcpgate stdio ARGS` with stdin as its input.
func runStdio(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	old := stdioInput
	stdioInput = strings.NewReader(stdin)
	t.Cleanup(func() { stdioInput = old })
	var stdout, stderr bytes.Buffer
	code := stdioBridge(args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

func TestStdioForwards(t *testing.T) {
	u := &stdioUpstream{}
	ts := httptest.NewServer(u)
	defer ts.Close()
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	res := runStdio(t, in, "--url", ts.URL+"/mcp", "--transport", "http", "--header", "Authorization: Bearer tok", "--log-level", "debug")
	if res.code != exitOK {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	// Replies may come in either order: each must be there once.
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 2 || strings.Count(res.stdout, `"id":1,`) != 1 || strings.Count(res.stdout, `"id":2,`) != 1 {
		t.Errorf("stdout:\n%s", res.stdout)
	}
	if strings.Contains(res.stderr, "Bearer tok") {
		t.Errorf("the header value was logged:\n%s", res.stderr)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.auth {
		if a != "Bearer tok" {
			t.Errorf("a request carried Authorization %q", a)
		}
	}
	if u.deletes != 1 {
		t.Errorf("%d DELETEs, want 1", u.deletes)
	}
}

func TestStdioUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--url", "http://x/", "extra"},
		{"--url", "http://x/", "--transport", "ws"},
		{"--url", "http://x/", "--header", "novalue"},
		{"--url", "http://x/", "--log-level", "loud"},
		{"--url", "http://x/", "--drain-timeout", "0s"},
	} {
		if res := runStdio(t, "", args...); res.code != exitUsage || !strings.Contains(res.stderr, "usage: mcpgate stdio") {
			t.Errorf("stdio %q: exit %d\n%s", args, res.code, res.stderr)
		}
	}
	if res := runStdio(t, "", "--url", "ftp://x/"); res.code != exitFailure {
		t.Errorf("ftp URL: exit %d\n%s", res.code, res.stderr)
	}
	res := runStdio(t, "", "--help")
	if res.code != exitOK || !strings.Contains(res.stdout, "--transport") || !strings.Contains(res.stdout, "Claude Desktop") {
		t.Errorf("--help: exit %d\n%s", res.code, res.stdout)
	}
}

// TestStdioUnreachable: with the remote unreachable, `mcpgate stdio` answers
// every request (one sent before initialize, the initialize, one after it)
// with an error naming the cause, and exits 0 at the end of stdin. Before,
// it answered only the initialize and never exited.
func TestStdioUnreachable(t *testing.T) {
	url := "http://" + testkit.FreeAddr(t) + "/mcp"
	in := `{"jsonrpc":"2.0","id":0,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	start := time.Now()
	res := runStdio(t, in, "--url", url)
	if res.code != exitOK {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("exited after %v", d)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("stdout:\n%s", res.stdout)
	}
	for i, l := range lines {
		if !strings.Contains(l, "remote "+url+" unreachable: connection refused") || strings.Count(res.stdout, fmt.Sprintf(`"id":%d,`, i)) != 1 {
			t.Errorf("stdout:\n%s", res.stdout)
		}
	}
}

// statelessLines are a 2026-07-28 client's first requests: no initialize,
// the protocol version in each request's _meta.
const statelessLines = `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n" +
	`{"jsonrpc":"2.0","id":"t","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n"

// TestStdioStatelessClient: `mcpgate stdio` serves a 2026-07-28 client:
// in front of a 2026-07-28 server, its requests are forwarded (with the
// --header); in front of a session-era one, or with --transport sse, each
// gets -32022 so that the client can fall back to initialize.
func TestStdioStatelessClient(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	modernTS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if r.Method != http.MethodPost || err != nil || r.Header.Get("Mcp-Method") != msg.MethodName() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if msg.MethodIs("server/discover") {
			w.Write(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{"supportedVersions":["2026-07-28"],"capabilities":{}}`)))
			return
		}
		w.Write(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{"resultType":"complete","tools":[]}`)))
	}))
	defer modernTS.Close()
	res := runStdio(t, statelessLines, "--url", modernTS.URL+"/mcp", "--header", "Authorization: Bearer tok")
	if res.code != exitOK || strings.Count(res.stdout, `"supportedVersions":["2026-07-28"]`) != 1 || strings.Count(res.stdout, `"tools":[]`) != 1 {
		t.Errorf("modern remote: exit %d, stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	mu.Lock()
	if len(auth) != 3 || auth[0] != "Bearer tok" || auth[1] != "Bearer tok" || auth[2] != "Bearer tok" {
		t.Errorf("the modern remote got Authorization %q (want the probe and both requests)", auth)
	}
	mu.Unlock()

	sessionTS := httptest.NewServer(&stdioUpstream{})
	defer sessionTS.Close()
	for _, transport := range []string{"auto", "sse"} {
		res := runStdio(t, statelessLines, "--url", sessionTS.URL+"/mcp", "--transport", transport)
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		if res.code != exitOK || len(lines) != 2 {
			t.Errorf("session remote, %s: exit %d, stdout:\n%s", transport, res.code, res.stdout)
			continue
		}
		for _, l := range lines {
			if !strings.Contains(l, `"code":-32022`) || !strings.Contains(l, `"requested":"2026-07-28"`) || !strings.Contains(l, `"2025-11-25"`) {
				t.Errorf("session remote, %s: %s", transport, l)
			}
		}
	}
}
