package front

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestStoreHandoffsBeforeStopping: a portable session opened while the
// store refused its handoff record (Redis slow or down) would be lost
// with its replica in a rolling restart: the others find no record,
// forward to the replica that is gone, and answer 404. StoreHandoffs, as
// the replica begins to stop, stores the records the store has not
// confirmed, and another replica then resumes the session.
func TestStoreHandoffsBeforeStopping(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	ba := &portableBackend{fakeBackend: newFakeBackend()}
	bb := &portableBackend{fakeBackend: newFakeBackend()}
	a := startReplica(t, cl, "a", ring, ba)
	b := startReplica(t, cl, "b", ring, bb)
	store := cl.replica("", "")
	ctx := context.Background()

	cl.mu.Lock()
	cl.down = true
	cl.mu.Unlock()
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "a's failed write of the handoff record counted", func() bool { return a.h.Forwards().StoreErrors > 0 })
	if rec, _, _ := store.State(ctx, sid); rec != nil {
		t.Fatalf("a record stored while the store was down: %q", rec)
	}
	cl.mu.Lock()
	cl.down = false
	cl.mu.Unlock()

	if stored, failed := a.h.StoreHandoffs(ctx); stored != 1 || failed != 0 {
		t.Fatalf("StoreHandoffs: stored %d, failed %d; want the one session's record stored", stored, failed)
	}
	if rec, _, _ := store.State(ctx, sid); string(rec) != string(handoffRecord(v0618, []byte("state:1"))) {
		t.Fatalf("the record after StoreHandoffs: %q", rec)
	}
	if stored, failed := a.h.StoreHandoffs(ctx); stored != 0 || failed != 0 {
		t.Errorf("StoreHandoffs again: stored %d, failed %d; want nothing left to store", stored, failed)
	}

	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if resp, body := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618); resp.StatusCode != http.StatusOK {
		t.Fatalf("ping on b: %d %s", resp.StatusCode, body)
	}
	bb.mu.Lock()
	resumed := append([]string(nil), bb.resumed...)
	bb.mu.Unlock()
	if len(resumed) != 1 || resumed[0] != "state:1" {
		t.Errorf("b resumed %q, want the session's state:1 once", resumed)
	}
}

// TestStoreHandoffsStoreStillDown: with the store still refusing,
// StoreHandoffs says how many records it could not store, and keeps
// them for a later call.
func TestStoreHandoffsStoreStillDown(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, &portableBackend{fakeBackend: newFakeBackend()})
	cl.mu.Lock()
	cl.down = true
	cl.mu.Unlock()
	initSession(t, a.srv)
	initSession(t, a.srv)
	testkit.WaitFor(t, "a's two failed writes counted", func() bool { return a.h.Forwards().StoreErrors >= 2 })
	if stored, failed := a.h.StoreHandoffs(context.Background()); stored != 0 || failed != 2 {
		t.Fatalf("StoreHandoffs with the store down: stored %d, failed %d; want 0, 2", stored, failed)
	}
	cl.mu.Lock()
	cl.down = false
	cl.mu.Unlock()
	if stored, failed := a.h.StoreHandoffs(context.Background()); stored != 2 || failed != 0 {
		t.Fatalf("StoreHandoffs once the store is back: stored %d, failed %d; want 2, 0", stored, failed)
	}
}

// TestUnstoredForgetsEndedSessions: a session whose record the store
// refused, then ended by its client, is not held until the replica
// stops (a Redis outage would otherwise keep every session opened
// during it).
func TestUnstoredForgetsEndedSessions(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, &portableBackend{fakeBackend: newFakeBackend()})
	cl.mu.Lock()
	cl.down = true
	cl.mu.Unlock()
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "a's failed write counted", func() bool { return a.h.Forwards().StoreErrors > 0 })
	if resp, body := do(t, a.srv, http.MethodDelete, mcpPath, "", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618); resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	held := 0
	a.h.unstored.Range(func(any, any) bool { held++; return true })
	if held != 0 {
		t.Errorf("%d ended sessions still held for StoreHandoffs", held)
	}
}
