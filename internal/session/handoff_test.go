package session

import (
	"testing"
	"time"
)

// TestStateVersionOrder: a higher count wins whatever the ties; at one
// count the higher tie wins; a version is not newer than itself; the zero
// version is older than any other.
func TestStateVersionOrder(t *testing.T) {
	for _, c := range []struct {
		v, o  StateVersion
		newer bool
	}{
		{StateVersion{2, 0}, StateVersion{1, 9}, true},
		{StateVersion{1, 9}, StateVersion{2, 0}, false},
		{StateVersion{3, 5}, StateVersion{3, 4}, true},
		{StateVersion{3, 4}, StateVersion{3, 5}, false},
		{StateVersion{3, 4}, StateVersion{3, 4}, false},
		{StateVersion{1, 0}, StateVersion{}, true},
		{StateVersion{}, StateVersion{}, false},
	} {
		if got := c.v.Newer(c.o); got != c.newer {
			t.Errorf("%+v.Newer(%+v) = %v, want %v", c.v, c.o, got, c.newer)
		}
	}
	if a, b := Tiebreak("replica-a"), Tiebreak("replica-b"); a == b || a >= 1<<48 || b >= 1<<48 || a != Tiebreak("replica-a") {
		t.Errorf("Tiebreak: %d, %d: want two numbers below 2^48, stable per instance", a, b)
	}
}

// TestSessionHandoffVersions: a replica's own change counts one past the
// newest version the session had, adopted or its own; a state adopted
// from the store replaces the session's only when newer, and hands back
// the registered apply function then.
func TestSessionHandoffVersions(t *testing.T) {
	st := NewStore(Limits{})
	s, err := st.Create("x", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if v := s.NextHandoff([]byte("a1"), 7); v != (StateVersion{1, 7}) {
		t.Fatalf("first change: %+v, want {1 7}", v)
	}
	applied := 0
	s.SetApply(func([]byte) { applied++ })
	if apply, newer := s.AdoptHandoff([]byte("b1"), StateVersion{1, 3}); newer || apply != nil {
		t.Error("a state of the same count and a lower tie was adopted")
	}
	apply, newer := s.AdoptHandoff([]byte("b5"), StateVersion{5, 3})
	if !newer || apply == nil {
		t.Fatal("a newer state was not adopted")
	}
	apply(nil)
	if state, v := s.HandoffAt(); string(state) != "b5" || v != (StateVersion{5, 3}) || applied != 1 {
		t.Errorf("after adopting: %q %+v, applied %d", state, v, applied)
	}
	if v := s.NextHandoff([]byte("a6"), 7); v != (StateVersion{6, 7}) {
		t.Errorf("a change after adopting {5 3}: %+v, want {6 7}", v)
	}
	if _, newer := s.AdoptHandoff([]byte("b4"), StateVersion{4, 9}); newer {
		t.Error("an older state replaced the session's")
	}
	if state := s.Handoff(); string(state) != "a6" {
		t.Errorf("handoff %q, want a6", state)
	}
}
