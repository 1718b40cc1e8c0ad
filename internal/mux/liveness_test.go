package mux

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// TestLivenessPingTimeoutRestarts: with PingInterval set, a server that
// stops answering ping is restarted through Restart.
func TestLivenessPingTimeoutRestarts(t *testing.T) {
	m, up := startShared(t, Options{PingInterval: 50 * time.Millisecond})
	up.waitFor(t, "a restart", func() bool { return len(up.restarts) == 1 })
	up.mu.Lock()
	reason := up.restarts[0]
	pings := len(up.writtenLocked("ping"))
	up.mu.Unlock()
	if reason != "liveness ping timed out" || pings == 0 {
		t.Fatalf("restart %q after %d pings", reason, pings)
	}
	if m.Stats().LivenessFailures != 1 {
		t.Fatalf("liveness failures %d", m.Stats().LivenessFailures)
	}
}

// TestLivenessPingMethodNotFoundIsAlive: a server that answers ping with
// "method not found" is alive; answered pings never restart it.
func TestLivenessPingMethodNotFoundIsAlive(t *testing.T) {
	m := New(Options{Name: "t", PingInterval: 20 * time.Millisecond})
	defer m.Close()
	up := newFakeUp(m)
	up.answer("ping", rpcErr(protocol.CodeMethodNotFound, "Method not found"))
	m.SetUpstream(up)
	m.Started(1)
	up.waitFor(t, "five pings", func() bool { return len(up.writtenLocked("ping")) >= 5 })
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.restarts) != 0 || m.Stats().LivenessFailures != 0 {
		t.Fatalf("restarted: %v", up.restarts)
	}
}

// TestLivenessPingErrorRestarts: an error answer other than "method not
// found" counts as a failed probe.
func TestLivenessPingErrorRestarts(t *testing.T) {
	_, up := startShared(t, Options{PingInterval: 20 * time.Millisecond})
	up.answer("ping", rpcErr(-32603, "event loop wedged"))
	up.waitFor(t, "a restart", func() bool { return len(up.restarts) == 1 })
	up.mu.Lock()
	defer up.mu.Unlock()
	if !strings.Contains(up.restarts[0], "event loop wedged") {
		t.Fatalf("restart reason %q", up.restarts[0])
	}
}
