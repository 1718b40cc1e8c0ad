package mux

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestHandlerCallsBeforeSetUpstream: the backend sets the upstream only
// after StartStdio returned, and the supervisor may call Waiting, Started,
// Line and Exited before that. None of them blocks or panics: a server
// ping (or request) that needs an answer is dropped and counted, and the
// initialize of a generation that exited meanwhile is never written to its
// successor once the upstream is set.
func TestHandlerCallsBeforeSetUpstream(t *testing.T) {
	m := New(Options{Name: "early", Logger: slog.New(slog.DiscardHandler)})
	defer m.Close()
	spawn := errors.New("upstream: command not found: uvx")
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Waiting(spawn, time.Millisecond)
		if st := m.State(); st.Phase != BackingOff || !errors.Is(st.Reason, spawn) {
			t.Errorf("after Waiting: %+v", st)
		}
		m.Started(1)
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`))
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`))
		m.Line(1, []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("handler calls before SetUpstream blocked")
	}
	if st := m.Stats(); st.DroppedSends != 2 {
		t.Fatalf("DroppedSends %d, want 2 (the ping answer and the refusal)", st.DroppedSends)
	}
	// Generation 1's initialize is registered and waits for the upstream;
	// generation 1 exits and 2 starts before the upstream is set.
	testkit.WaitFor(t, "gen 1's initialize pending", func() bool { return m.Pending() == 1 })
	m.Exited(1, errors.New("exit status 1"))
	m.Started(2)
	up := newFakeUp(m)
	up.gen.Store(2)
	m.SetUpstream(up)
	waitPhase(t, m, Ready)
	up.mu.Lock()
	defer up.mu.Unlock()
	if n := len(up.writtenLocked("initialize")); n != 1 {
		t.Fatalf("%d initialize requests written, want 1 (gen 2's): gen 1's reached its successor", n)
	}
}
