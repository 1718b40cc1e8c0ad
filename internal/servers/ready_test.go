package servers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// waitReady polls r until its readiness is want, and returns its state.
func waitReady(t *testing.T, r Readier, want bool) string {
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
	r, ok := s.(Readier)
	if !ok {
		t.Fatalf("%T is not a Readier", s)
	}
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
		ready, state := s.(Readier).Ready()
		if ready {
			t.Fatalf("a server whose command is missing is ready")
		}
		return strings.HasPrefix(state, "backing off: ") && strings.Contains(state, "command not found: mcpgate-test-no-such-command") &&
			(strings.Contains(state, "; retrying in ") || strings.HasSuffix(state, "; restarting"))
	})
}

// Servers with a process or upstream session per client session have no
// readiness of their own.
func TestPerSessionServersHaveNoReadiness(t *testing.T) {
	cfg := fakeServer("iso", testkit.FakeOptions{})
	cfg.Isolation = config.IsolationSession
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(Readier); ok {
		t.Errorf("%T is a Readier", s)
	}
}
