package servers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// waitReady polls r until its readiness is want, and returns its state.
func waitReady(t *testing.T, r Server, want bool) string {
	t.Helper()
	var state string
	testkit.WaitFor(t, fmt.Sprintf("Ready() = %v", want), func() bool {
		var ready bool
		ready, state = r.Ready()
		return ready == want
	})
	return state
}

// A shared server is ready once its process is initialized; one whose
// command does not exist is not, and says why; a closed one is not.
func TestSharedReady(t *testing.T) {
	s, err := New(fakeServer("fake", testkit.FakeOptions{}), "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.PerSession() {
		t.Fatalf("%T is per session", s)
	}
	r := s
	if state := waitReady(t, r, true); state != "" {
		t.Errorf("ready with state %q", state)
	}
	s.Close()
	if ready, state := r.Ready(); ready || !strings.Contains(state, "shutting down") {
		t.Errorf("closed: Ready() = %v, %q", ready, state)
	}

	missing := testServer("missing")
	missing.Command = "mcpgate-test-no-such-command"
	s, err = New(missing, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testkit.WaitFor(t, "a state backing off, naming the missing command", func() bool {
		ready, state := s.Ready()
		if ready {
			t.Fatalf("a server whose command is missing is ready")
		}
		return strings.HasPrefix(state, "backing off: ") && strings.Contains(state, "command not found: mcpgate-test-no-such-command") &&
			(strings.Contains(state, "; retrying in ") || strings.HasSuffix(state, "; restarting"))
	})
}

// Servers with a process or upstream session per client session have no
// readiness of their own, and say so.
func TestPerSessionServersHaveNoReadiness(t *testing.T) {
	cfg := fakeServer("iso", testkit.FakeOptions{})
	cfg.Isolation = config.IsolationSession
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.PerSession() {
		t.Errorf("%T is not per session", s)
	}
	if ready, state := s.Ready(); !ready || state != "per session" {
		t.Errorf("Ready() = %v, %q; want true, \"per session\"", ready, state)
	}
	if s.FirstStart() {
		t.Error("a per-session server is on its first start")
	}
	if c := s.Counters(); c != (Counters{}) {
		t.Errorf("Counters() = %+v; want zero", c)
	}
	if err := s.Restart("test"); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Restart: %v; want ErrNoProcess", err)
	}
}
