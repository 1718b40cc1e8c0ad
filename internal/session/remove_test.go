package session

import (
	"testing"
	"time"
)

// TestOnRemoved: every way out of the Store runs a session's OnRemoved
// functions once, after it is out (a Lookup from the function finds
// nothing); one registered after that runs at once; a session still in
// the Store runs none.
func TestOnRemoved(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name   string
		remove func(st *Store, s *Session)
	}{
		{"Delete", func(st *Store, s *Session) { st.Delete(s.ID) }},
		{"DeleteTarget", func(st *Store, s *Session) { st.DeleteTarget(s.Server) }},
		{"Expire", func(st *Store, s *Session) { st.Expire(now.Add(time.Hour)) }},
		{"DeleteAll", func(st *Store, s *Session) { st.DeleteAll() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStore(Limits{IdleTimeout: time.Minute})
			s, err := st.Create("srv", "", now)
			if err != nil {
				t.Fatal(err)
			}
			other, _ := st.Create("other", "", now.Add(2*time.Hour)) // stays unless all go
			ran, otherRan := 0, 0
			s.OnRemoved(func() {
				ran++
				if st.Lookup(s.ID) != nil {
					t.Error("OnRemoved ran while the session was still in the Store")
				}
			})
			other.OnRemoved(func() { otherRan++ })
			if ran != 0 {
				t.Fatal("OnRemoved ran before the session was removed")
			}
			tc.remove(st, s)
			tc.remove(st, s) // a second time finds nothing (or only others)
			if ran != 1 {
				t.Errorf("OnRemoved ran %d times, want 1", ran)
			}
			late := 0
			s.OnRemoved(func() { late++ })
			if late != 1 {
				t.Errorf("OnRemoved registered after the removal ran %d times, want 1 at once", late)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.name == "DeleteAll"]; otherRan != want {
				t.Errorf("the other session's OnRemoved ran %d times, want %d", otherRan, want)
			}
		})
	}
}
