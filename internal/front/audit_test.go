package front

import (
	"net/http"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// auditEntry and parseAudit read the audit log's lines (testkit).
type auditEntry = testkit.AuditLine

func parseAudit(t *testing.T, s string) []auditEntry { return testkit.ParseAuditLines(t, s) }

func TestAuditLines(t *testing.T) {
	for _, withArgs := range []bool{true, false} {
		var buf testkit.SyncBuffer
		au := audit.New(&buf, withArgs)
		clock := newTestClock()
		_, srv := testServer(t, newFakeBackend(), Config{Auth: newFakeAuth(), Audit: au, Limits: &limits.Config{ToolsPerSecond: 1, Now: clock.Now}})
		who := []string{"Authorization", "Bearer alice-key"}
		resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, who...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		hdr := append(who, "Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version", "2025-06-18")
		bodies := []string{
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
			`{"jsonrpc":"2.0","id":"two","method":"missing"}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"again"}}}`, // refused: 429
			`{"jsonrpc":"2.0","id":4,"method":"progress"}`,                                                         // answered as an SSE stream
			`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"file:///a"}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`, // not a request: no line
		}
		for _, b := range bodies {
			do(t, srv, http.MethodPost, mcpPath, b, hdr...)
		}
		// Before messages are read: a line without method.
		do(t, srv, http.MethodPost, mcpPath, `{`, hdr...)
		au.Close()
		lines := parseAudit(t, buf.String())
		if len(lines) != 7 {
			t.Fatalf("%d lines, want 7:\n%s", len(lines), buf.String())
		}
		want := []struct {
			method, id, name, outcome string
			code, status              int
		}{
			{"initialize", "0", "", "ok", 0, 200},
			{"tools/call", "1", "echo", "ok", 0, 200},
			{"missing", `"two"`, "", "error", -32601, 200},
			{"tools/call", "3", "echo", "rate_limited", -32000, 429},
			{"progress", "4", "", "ok", 0, 200},
			{"resources/read", "5", "file:///a", "ok", 0, 200},
			{"", "", "", "error", -32700, 400},
		}
		for i, w := range want {
			l := lines[i]
			if l.Method != w.method || string(l.ID) != w.id || l.Name != w.name || l.Outcome != w.outcome || l.Code != w.code || l.Status != w.status {
				t.Errorf("line %d: %+v, want %+v", i, l, w)
			}
			if l.Principal != "key:alice" || l.Kind != "server" || l.Target != "x" || l.DurationMs == nil || l.BytesOut <= 0 {
				t.Errorf("line %d: principal %q kind %q target %q duration %v bytes out %d", i, l.Principal, l.Kind, l.Target, l.DurationMs, l.BytesOut)
			}
			if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil {
				t.Errorf("line %d: time %q: %v", i, l.Time, err)
			}
		}
		if lines[1].BytesIn != len(bodies[0]) {
			t.Errorf("bytesIn %d, want %d", lines[1].BytesIn, len(bodies[0]))
		}
		gotArgs := string(lines[1].Arguments)
		if withArgs && gotArgs != `{"text":"hi"}` || !withArgs && gotArgs != "" {
			t.Errorf("arguments %q with arguments=%v", gotArgs, withArgs)
		}
	}
}
