package mux

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// TestClientCloseAnswersInFlight: closing a session answers each of its
// requests still in flight (written or queued behind maxInFlight) with a
// -32000 error on its stream, before the server is told to cancel.
func TestClientCloseAnswersInFlight(t *testing.T) {
	m, up := startShared(t, Options{MaxInFlight: 1})
	var events []string
	up.mu.Lock()
	up.events = &events
	up.mu.Unlock()
	out := newRec()
	out.events, out.evMu = &events, &up.mu
	c := m.Join(out)
	c.Handle(context.Background(), request(t, `"a"`, "tools/call", `{}`), out) // written
	c.Handle(context.Background(), request(t, `"b"`, "tools/call", `{}`), out) // queued
	c.Close()
	replies := out.waitReplies(t, 2)
	ids := map[string]bool{}
	for _, r := range replies {
		code, text, isErr := errorCode(t, r)
		if !isErr || code != protocol.CodeServerError || !strings.Contains(text, "session closed") {
			t.Fatalf("reply %s, want a -32000 session-closed error", r)
		}
		msg, _ := jsonrpc.Parse(r)
		ids[string(msg.Bytes(msg.ID))] = true
	}
	if !ids[`"a"`] || !ids[`"b"`] {
		t.Fatalf("replies %q", replies)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	var order []string
	for _, e := range events {
		if e == "reply" || e == "upstream notifications/cancelled" {
			order = append(order, e)
		}
	}
	want := []string{"reply", "reply", "upstream notifications/cancelled"} // b was never written: nothing to cancel
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("order %v, want %v", order, want)
	}
	if m.Pending() != 0 {
		t.Fatalf("%d pending after Close", m.Pending())
	}
}

// TestAbandonStaysSilent: a client that left gets no answer; its request
// is cancelled upstream.
func TestAbandonStaysSilent(t *testing.T) {
	m, up := startShared(t, Options{})
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, `"a"`, "tools/call", `{}`), out)
	c.Abandon(out)
	up.waitFor(t, "the cancellation", func() bool { return len(up.writtenLocked("notifications/cancelled")) == 1 })
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.replies) != 0 {
		t.Fatalf("abandoned request answered: %q", out.replies)
	}
	if m.Pending() != 0 {
		t.Fatalf("%d pending", m.Pending())
	}
}
