package mux

import (
	"context"
	"testing"

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
