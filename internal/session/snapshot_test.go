package session

import (
	"testing"
	"time"
)

func TestSnapshot(t *testing.T) {
	st := NewStore(Limits{})
	now := time.Now()
	a, _ := st.Create("a", "", now)
	b, _ := st.Create("endpoints/all", "", now)
	snap := st.Snapshot()
	if len(snap) != 2 || !(snap[0] == a && snap[1] == b || snap[0] == b && snap[1] == a) {
		t.Fatalf("Snapshot = %v, want a and b", snap)
	}
	st.Delete(a.ID)
	if len(snap) != 2 {
		t.Errorf("a snapshot changed with the store")
	}
	if got := st.Snapshot(); len(got) != 1 || got[0] != b {
		t.Errorf("Snapshot after Delete = %v, want b", got)
	}
}
