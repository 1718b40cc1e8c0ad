package mux

import (
	"context"
	"log/slog"
	"testing"
)

// TestExclusiveInitializeNotServed: in exclusive mode the client's own
// initialize reply does not count as Served (a process that initializes
// and crashes right after keeps backing off); its next answered request
// does.
func TestExclusiveInitializeNotServed(t *testing.T) {
	m := New(Options{Name: "t", Exclusive: true, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(m.Close)
	up := newFakeUp(m)
	up.answer("tools/call", result(`{}`))
	m.SetUpstream(up)
	m.Started(1)
	waitPhase(t, m, Ready)
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, "0", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{}}`), out)
	if _, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); isErr {
		t.Fatal("initialize failed")
	}
	up.mu.Lock()
	served := append([]uint64(nil), up.served...)
	up.mu.Unlock()
	if len(served) != 0 {
		t.Fatalf("served %v after the client's initialize, want none", served)
	}
	c.Handle(context.Background(), request(t, "1", "tools/call", `{}`), out)
	out.waitReplies(t, 2)
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.served) != 1 || up.served[0] != 1 {
		t.Fatalf("served %v after tools/call, want [1]", up.served)
	}
}
