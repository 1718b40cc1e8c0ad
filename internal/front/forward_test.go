package front

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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

// An owner that dies with a forwarded request on its connection (it read
// the request, then its process was killed) costs the client a 404, as
// an owner that refuses the dial does, so that the client initializes
// again: not an answer about the request's body, which the forward spent.
func TestOwnerDiesMidForward(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	read := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Read the whole request, then die without a word.
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				body, _ := io.ReadAll(req.Body)
				read <- string(body)
			}
			c.Close()
		}
	}()
	for _, legacy := range []bool{false, true} {
		sid, err := mintID(ring, cl.replica("c", ln.Addr().String()), "x", "", legacy, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		call := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		var resp *http.Response
		var body string
		if legacy {
			resp, body = do(t, b.srv, http.MethodPost, "/servers/x/messages?sessionId="+sid, call, "Content-Type", "application/json")
		} else {
			resp, body = do(t, b.srv, http.MethodPost, mcpPath, call, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
		}
		if got := testkit.Receive(t, read, "the request at the owner"); got != call {
			t.Errorf("the owner read %q", got)
		}
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("legacy %v: the owner died with the request: %d %s, want 404", legacy, resp.StatusCode, body)
		}
	}
	if f := b.h.Forwards(); f.Failed != 2 || f.Forwarded != 0 {
		t.Errorf("forwards: %+v, want two failed", f)
	}
}

// An owner that missed its heartbeats (starved of CPU on a loaded node,
// say) but lives still serves its sessions: the request is forwarded, not
// answered 404 on the heartbeats alone, which would end a session its
// owner holds (TestClusterTypeScriptReverseBridge under load saw it). Only
// once the dial is refused too is the owner gone (TestOwnerGone).
func TestOwnerMissingBeatsStillServes(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, newFakeBackend())
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	sid := initSession(t, a.srv)
	cl.mu.Lock()
	cl.dead["a"] = true // no heartbeat from a for three beats
	cl.mu.Unlock()

	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	resp, body := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("a call on b for a's session, a late on its heartbeats: %d %s, want a's answer", resp.StatusCode, body)
	}
	testkit.WaitFor(t, "b counting the forward", func() bool { return b.h.Forwards().Forwarded == 1 })
	if f := b.h.Forwards(); f.Gone != 0 || f.Failed != 0 {
		t.Errorf("forwards: %+v, want one forwarded, none gone or failed", f)
	}
}
