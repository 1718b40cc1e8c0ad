package mux

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// A session-isolated process gets exactly one notifications/initialized
// per generation, whoever sends it. A restart replays the client's
// initialize and sends its own notifications/initialized; the session's
// next request, or the client's own notification arriving late, must not
// send another to that generation. The old code kept one flag for the
// session's life, unset by a restart that came before the client's first
// request: the new generation got two.
func TestFaultInitializedOncePerGeneration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, c *Client, out *rec)
	}{
		{"request after restart", func(t *testing.T, c *Client, out *rec) {
			c.Handle(context.Background(), request(t, `"t"`, "tools/list", `{}`), out)
			out.waitReplies(t, 2)
		}},
		{"client's own after restart", func(t *testing.T, c *Client, out *rec) {
			n, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
			if err != nil {
				t.Fatal(err)
			}
			c.Handle(context.Background(), &n, nil)
			c.Handle(context.Background(), request(t, `"t"`, "tools/list", `{}`), out)
			out.waitReplies(t, 2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Options{Name: "t", Exclusive: true})
			t.Cleanup(m.Close)
			up := newFakeUp(m)
			up.answer("tools/list", result(`{"tools":[]}`))
			m.SetUpstream(up)
			m.Started(1)
			waitPhase(t, m, Ready)
			out := newRec()
			c := m.Join(newRec())
			c.Handle(context.Background(), request(t, `"i"`, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{}}`), out)
			out.waitReplies(t, 1)

			// The process exits before the session's first request (and
			// before the client's notifications/initialized got through).
			m.Exited(1, nil)
			up.gen.Store(2)
			up.mu.Lock()
			before := len(up.writtenLocked("notifications/initialized"))
			up.mu.Unlock()
			m.Started(2)
			waitPhase(t, m, Ready)
			up.waitFor(t, "the replay's notifications/initialized", func() bool {
				return len(up.writtenLocked("notifications/initialized")) == before+1
			})
			tc.after(t, c, out)
			up.mu.Lock()
			got := len(up.writtenLocked("notifications/initialized")) - before
			up.mu.Unlock()
			if got != 1 {
				t.Errorf("generation 2 got %d notifications/initialized, want 1", got)
			}
		})
	}
}

// gateInitUp is a fakeUp whose write of notifications/initialized waits
// for gate (entered tells it has begun): the moment between the claim of
// the notification and its write, held open.
type gateInitUp struct {
	*fakeUp
	entered, gate chan struct{}
}

func (u *gateInitUp) TrySend(msg []byte) error {
	if m, err := jsonrpc.Parse(msg); err == nil && m.MethodIs("notifications/initialized") {
		close(u.entered)
		<-u.gate
	}
	return u.fakeUp.TrySend(msg)
}

// TrySendGen is gated like TrySend (the embedded fakeUp's would bypass it).
func (u *gateInitUp) TrySendGen(_ uint64, msg []byte) error { return u.TrySend(msg) }

// Concurrent first requests of a session (claude.ai lists tools, prompts
// and resources at once) must all reach the process after the
// notifications/initialized the gateway sends for the first of them: the
// old code let the second go as soon as the first had claimed the
// notification, before it was written, so a server that refuses requests
// until it has the notification (the Python SDK's) refused it.
func TestFaultConcurrentFirstRequestsAfterInitialized(t *testing.T) {
	m := New(Options{Name: "t", Exclusive: true})
	t.Cleanup(m.Close)
	up := &gateInitUp{fakeUp: newFakeUp(m), entered: make(chan struct{}), gate: make(chan struct{})}
	up.answer("tools/list", result(`{"tools":[]}`))
	up.answer("prompts/list", result(`{"prompts":[]}`))
	m.SetUpstream(up)
	m.Started(1)
	waitPhase(t, m, Ready)
	c := m.Join(newRec())
	initOut := newRec()
	c.Handle(context.Background(), request(t, `"i"`, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{}}`), initOut)
	initOut.waitReplies(t, 1)

	outA, outB := newRec(), newRec()
	go c.Handle(context.Background(), request(t, `"a"`, "tools/list", `{}`), outA)
	<-up.entered // a's notification claimed, not yet written
	go c.Handle(context.Background(), request(t, `"b"`, "prompts/list", `{}`), outB)
	// Either b was written (it overtook the notification) or it is held
	// for it: wait for one of the two.
	deadline := time.After(10 * time.Second)
	for {
		up.mu.Lock()
		overtook := len(up.writtenLocked("prompts/list")) > 0
		up.mu.Unlock()
		if overtook {
			t.Fatal("the session's second request reached the process before its notifications/initialized")
		}
		m.mu.Lock()
		held := c.initHeld
		m.mu.Unlock()
		if held == 1 {
			break
		}
		select {
		case <-up.changed:
		case <-time.After(20 * time.Millisecond): // also re-check state changed elsewhere
		case <-deadline:
			t.Fatal("timed out waiting for b to be written or held")
		}
	}
	close(up.gate)
	outA.waitReplies(t, 1)
	outB.waitReplies(t, 1)
	up.mu.Lock()
	defer up.mu.Unlock()
	var order []string
	for _, raw := range up.sent {
		if msg, err := jsonrpc.Parse(raw); err == nil {
			order = append(order, msg.MethodName())
		}
	}
	want := []string{"initialize", "notifications/initialized", "tools/list", "prompts/list"}
	if len(order) != 4 || order[1] != want[1] || order[0] != want[0] {
		t.Errorf("written %v, want initialize, notifications/initialized, then the two lists", order)
	}
}
