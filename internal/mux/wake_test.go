package mux

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// startStarting returns a Mux whose server stays Starting: the upstream
// runs but never answers the gateway's initialize (InitTimeout is long).
func startStarting(t *testing.T, exclusive bool) *Mux {
	t.Helper()
	m := New(Options{Name: "slow", Exclusive: exclusive, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(m.Close)
	up := newFakeUp(m)
	up.answer("initialize", nil)
	m.SetUpstream(up)
	m.Started(1)
	if exclusive {
		// Exclusive mode has no gateway initialize: the process is ready
		// at once. Replace it by one that is still starting: a restart
		// replays the recorded initialize, which is never answered.
		waitPhase(t, m, Ready)
		c := m.Join(newRec())
		m.mu.Lock()
		c.init = []byte(`{}`)
		m.mu.Unlock()
		m.Exited(1, nil)
		up.gen.Store(2)
		m.Started(2)
		up.waitFor(t, "the replayed initialize", func() bool { return len(up.writtenLocked("initialize")) == 1 })
	}
	if st := m.State(); st.Phase != Starting {
		t.Fatalf("state %v, want starting", st.Phase)
	}
	return m
}

// waitingRequests are the client requests that wait for a starting server,
// each on a code path of its own.
var waitingRequests = []struct{ method, params string }{
	{"tools/call", `{}`},
	{"initialize", `{"protocolVersion":"2025-11-25","capabilities":{}}`},
	{"logging/setLevel", `{"level":"debug"}`},
	{"resources/subscribe", `{"uri":"file:///a"}`},
}

// TestClientCloseWakesWaitingRequests: a request waiting for a starting
// server is answered "session closed" as soon as its session closes, not
// when the server becomes ready or the wait times out (30 s): a DELETE or
// shutdown must not wait on it.
func TestClientCloseWakesWaitingRequests(t *testing.T) {
	for _, exclusive := range []bool{false, true} {
		m := startStarting(t, exclusive)
		c := m.Join(newRec())
		var wg sync.WaitGroup
		outs := make([]*rec, len(waitingRequests))
		for i, r := range waitingRequests {
			if exclusive && r.method != "tools/call" {
				continue // exclusive mode forwards everything the same way
			}
			outs[i] = newRec()
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.Handle(context.Background(), request(t, "1", r.method, r.params), outs[i])
			}()
		}
		c.Close()
		for i, out := range outs {
			if out == nil {
				continue
			}
			reply := out.waitReplies(t, 1)[0]
			code, text, isErr := errorCode(t, reply)
			if !isErr || code != protocol.CodeServerError || text != "mcpgate: session closed" {
				t.Fatalf("exclusive=%v %s: reply %s, want a -32000 session-closed error", exclusive, waitingRequests[i].method, reply)
			}
		}
		wg.Wait()
		m.mu.Lock()
		subs := len(m.subs)
		m.mu.Unlock()
		if subs != 0 {
			t.Fatalf("exclusive=%v: %d subscriptions left by a closed session", exclusive, subs)
		}
	}
}

// TestMuxCloseWakesWaitingRequests: Mux.Close answers a request waiting for
// a starting server at once, with the shutdown error.
func TestMuxCloseWakesWaitingRequests(t *testing.T) {
	m := startStarting(t, false)
	c := m.Join(newRec())
	var wg sync.WaitGroup
	outs := make([]*rec, len(waitingRequests))
	for i, r := range waitingRequests {
		outs[i] = newRec()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Handle(context.Background(), request(t, "1", r.method, r.params), outs[i])
		}()
	}
	m.Close()
	for i, out := range outs {
		reply := out.waitReplies(t, 1)[0]
		_, text, isErr := errorCode(t, reply)
		if !isErr || !strings.Contains(text, "shutting down") {
			t.Fatalf("%s: reply %s, want the shutdown error", waitingRequests[i].method, reply)
		}
	}
	wg.Wait()
}
