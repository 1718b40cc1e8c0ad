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

// TestResumedClientSendsNoInitialize: the client of a session initialized
// on another replica has the session's version at once, and its requests
// go upstream with no initialize or notifications/initialized before them:
// the upstream session had both already.
func TestResumedClientSendsNoInitialize(t *testing.T) {
	m := New(Options{Name: "t", Exclusive: true})
	t.Cleanup(m.Close)
	up := newFakeUp(m)
	up.answer("tools/list", result(`{"tools":[]}`))
	m.SetUpstream(up)
	m.Started(1)
	waitPhase(t, m, Ready)
	c := m.Join(newRec())
	c.Resumed("2025-06-18")
	if v := c.Version(); v != "2025-06-18" {
		t.Errorf("Version = %q", v)
	}
	out := newRec()
	c.Handle(context.Background(), request(t, `"r"`, "tools/list", `{}`), out)
	out.waitReplies(t, 1)
	up.mu.Lock()
	defer up.mu.Unlock()
	var methods []string
	for _, raw := range up.sent {
		if msg, err := jsonrpc.Parse(raw); err == nil {
			methods = append(methods, msg.MethodName())
		}
	}
	if len(methods) != 1 || methods[0] != "tools/list" {
		t.Errorf("the upstream got %q, want the request alone", methods)
	}
}
