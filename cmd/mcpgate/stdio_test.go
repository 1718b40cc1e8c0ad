package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/mcp"
	l.Close()
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
