package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestOpenAudit(t *testing.T) {
	au, _, closeFn, err := openAudit(nil, nil)
	if au != nil || err != nil {
		t.Fatalf("no audit block: %v, %v", au, err)
	}
	closeFn()

	path := filepath.Join(t.TempDir(), "audit.jsonl")
	au, _, closeFn, err = openAudit(&config.Audit{File: path}, nil)
	if err != nil || au == nil {
		t.Fatalf("openAudit: %v", err)
	}
	closeFn()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("audit file mode %v, want 0600", perm)
	}

	_, _, _, err = openAudit(&config.Audit{File: t.TempDir()}, nil) // a directory
	if err == nil || !strings.Contains(err.Error(), "gateway.audit.file") {
		t.Errorf("opening a directory: %v; want an error naming gateway.audit.file", err)
	}
}

func TestLimitsMapped(t *testing.T) {
	if limitsOf(nil) != nil {
		t.Error("no limits block gave limits")
	}
	l := limitsOf(&config.Limits{RequestsPerSecond: 2, Burst: 3, MaxInFlight: 4, MaxSessions: 5, ToolsPerSecond: 6, ToolBurst: 7, MaxInFlightTotal: 8})
	if l.RequestsPerSecond != 2 || l.Burst != 3 || l.MaxInFlight != 4 || l.MaxSessions != 5 || l.ToolsPerSecond != 6 || l.ToolBurst != 7 || l.MaxInFlightTotal != 8 {
		t.Errorf("limits mapped to %+v", l)
	}
}

// TestAuditAndLimitsWired: gateway.audit and gateway.limits reach the
// front: a real session's calls are logged, and the tool rate refuses.
func TestAuditAndLimitsWired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Audit = &config.Audit{File: path, Arguments: true}
	cfg.Gateway.Limits = &config.Limits{ToolsPerSecond: 0.001}
	g := startGateway(t, cfg)
	c := g.client("fake")
	c.connect(t)
	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`
	if r := c.post(t, fmt.Sprintf(call, 1)); r.Status != http.StatusOK {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	r := c.post(t, fmt.Sprintf(call, 2))
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "1000" {
		t.Fatalf("second call: %d, Retry-After %q; want 429 and 1000", r.Status, r.Header.Get("Retry-After"))
	}
	if err := g.stop(); err != nil { // the log is complete once stopped
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for l := range strings.Lines(string(data)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (initialize, two calls):\n%s", len(lines), data)
	}
	for i, want := range []struct{ method, outcome string }{{"initialize", "ok"}, {"tools/call", "ok"}, {"tools/call", "rate_limited"}} {
		if lines[i]["method"] != want.method || lines[i]["outcome"] != want.outcome || lines[i]["target"] != "fake" || lines[i]["principal"] != "" {
			t.Errorf("line %d: %v; want %s %s", i, lines[i], want.method, want.outcome)
		}
	}
	if args, _ := json.Marshal(lines[1]["arguments"]); string(args) != `{"message":"hi"}` || lines[1]["name"] != "echo" {
		t.Errorf("call line: name %v, arguments %s", lines[1]["name"], args)
	}
}
