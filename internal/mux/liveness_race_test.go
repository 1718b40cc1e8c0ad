package mux

import (
	"errors"
	"testing"
	"time"
)

// TestLivenessPingFailedByMuxIsNotAFailure: a liveness ping still waiting
// when its process exits, or when the Mux closes, is failed by the Mux
// itself; that is not the server refusing ping, so it neither counts as a
// liveness failure nor restarts anything.
func TestLivenessPingFailedByMuxIsNotAFailure(t *testing.T) {
	for _, how := range []string{"exit", "close"} {
		t.Run(how, func(t *testing.T) {
			m, up := startShared(t, Options{PingInterval: 500 * time.Millisecond})
			writtenID(t, up, "ping", 0) // unanswered: the fake has no answer for ping
			if how == "exit" {
				m.Exited(1, errors.New("exit status 1"))
			}
			m.Close() // waits for the probe
			up.mu.Lock()
			restarts := len(up.restarts)
			up.mu.Unlock()
			if f := m.Stats().LivenessFailures; f != 0 || restarts != 0 {
				t.Fatalf("%d liveness failures, %d restarts after the Mux failed the ping itself", f, restarts)
			}
		})
	}
}
