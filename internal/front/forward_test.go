package front

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A request forwarded to its session's owner is one request: the owner,
// which reads its messages and answers them, writes its audit line; the
// replica it passed through writes none. A forward whose owner cannot be
// reached is answered (404) where it landed, and audited there.
func TestForwardedRequestAuditedOnce(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	var logA, logB testkit.SyncBuffer
	auA, auB := audit.New(&logA, false), audit.New(&logB, false)
	a := startReplicaWith(t, cl, "a", ring, Config{Backends: map[string]conn.Backend{"x": newFakeBackend()}, Audit: auA}, nil)
	b := startReplicaWith(t, cl, "b", ring, Config{Backends: map[string]conn.Backend{"x": newFakeBackend()}, Audit: auB}, nil)
	sid := initSession(t, a.srv)
	resp, body := do(t, b.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":7`) {
		t.Fatalf("forwarded call: %d %s", resp.StatusCode, body)
	}
	if f := b.h.Forwards(); f.Forwarded != 1 {
		t.Fatalf("forwards: %+v, want the call forwarded", f)
	}
	// The owner gone: the 404 is b's own answer, and b's line.
	a.srv.Close()
	resp, _ = do(t, b.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("owner unreachable: %d, want 404", resp.StatusCode)
	}
	auA.Close()
	auB.Close()
	linesA, linesB := parseAudit(t, logA.String()), parseAudit(t, logB.String())
	if len(linesA) != 2 || linesA[1].Method != "tools/call" || string(linesA[1].ID) != "7" || linesA[1].Outcome != "ok" {
		t.Errorf("the owner's audit log: %+v, want initialize and the forwarded tools/call", linesA)
	}
	if len(linesB) != 1 || linesB[0].Status != http.StatusNotFound {
		t.Errorf("the audit log of the replica the call passed through: %+v, want only the 404 it answered itself", linesB)
	}
}
