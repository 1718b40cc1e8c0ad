package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestGlobalInFlightCap: gateway.limits.maxInFlightTotal against a real
// server. Three slow calls of two sessions hold the cap; the next request
// gets 503 with Retry-After and its id; cancelling them (a POST of
// notifications, which the cap never refuses) frees the slots, and
// requests are admitted again.
func TestGlobalInFlightCap(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Limits = &config.Limits{MaxInFlightTotal: 3}
	g := startGateway(t, cfg)
	a, b := g.client("fake"), g.client("fake")
	a.connect(t)
	b.connect(t)

	var wg sync.WaitGroup
	for i, c := range []*mcpClient{a, a, b} {
		wg.Go(func() {
			// Cancelled: no reply, the POST just ends (202 if it ends
			// before its reply turned into a stream, else 200).
			r := c.post(t, callBody(fmt.Sprintf(`"slow-%d"`, i), "slow", map[string]int{"ms": 600000}, ""))
			if r.Status != http.StatusOK && r.Status != http.StatusAccepted {
				t.Errorf("slow call %d: %d %s", i, r.Status, r.Body)
			}
		})
	}
	testkit.WaitFor(t, "three slow calls at the server", func() bool { return g.pending("fake") == 3 })

	r := b.post(t, callBody("44", "echo", map[string]string{"message": "hi"}, ""))
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("over the cap: %d, Retry-After %q, body %s; want 503 and 1", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	var m rpc
	if err := json.Unmarshal(r.Body, &m); err != nil || string(m.ID) != "44" || m.Error == nil || !strings.Contains(m.Error.Message, "overloaded") {
		t.Fatalf("refusal body %s: want id 44 and an overloaded error", r.Body)
	}

	for i, c := range []*mcpClient{a, a, b} {
		cancel := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-%d"}}`, i)
		if r := c.post(t, cancel); r.Status != http.StatusAccepted {
			t.Fatalf("cancel %d at the cap: %d %s", i, r.Status, r.Body)
		}
	}
	wg.Wait()
	// The slots are given back as the handlers return, just after their
	// responses end.
	var text string
	testkit.WaitFor(t, "a call admitted again", func() bool {
		r := b.post(t, callBody("45", "echo", map[string]string{"message": "again"}, ""))
		if r.Status == http.StatusOK {
			text = toolText(t, r.final(t))
		}
		return r.Status == http.StatusOK
	})
	if text != "again" {
		t.Fatalf("echo after the cap: %q", text)
	}
}

// TestAuditAuthRefusalsWithGate: with the gateway's own auth.Gate, a
// request without credentials gets an "unauthenticated" audit line, and a
// valid API key used where it may not go a "forbidden" one naming the key.
func TestAuditAuthRefusalsWithGate(t *testing.T) {
	const key = "k3y-0123456789abcdef"
	sum := sha256.Sum256([]byte(key))
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	cfg.Gateway.Auth = config.NewAuth()
	cfg.Gateway.Auth.APIKeys = []config.APIKey{{Name: "ci", SHA256: hex.EncodeToString(sum[:]), Servers: []string{"a"}}}
	cfg.Gateway.Audit = &config.Audit{File: path}
	g := startGateway(t, cfg)

	if r := g.client("a").post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusUnauthorized {
		t.Fatalf("without the key: %d", r.Status)
	}
	all := g.endpointClient("all")
	all.header.Set("Authorization", "Bearer "+key)
	if r := all.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusForbidden {
		t.Fatalf("the key on the endpoint: %d", r.Status)
	}
	if err := g.stop(); err != nil {
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
	want := []map[string]any{
		{"outcome": "unauthenticated", "status": 401.0, "principal": "", "kind": "server", "target": "a", "http": "POST /servers/a/mcp", "method": ""},
		{"outcome": "forbidden", "status": 403.0, "principal": "key:ci", "kind": "endpoint", "target": "all", "http": "POST /endpoints/all/mcp", "method": ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), data)
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, lines[i][k], v, lines[i])
			}
		}
	}
}
