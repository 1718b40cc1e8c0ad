package session

import (
	"testing"
	"time"
)

func TestByPrefix(t *testing.T) {
	st := NewStore(Limits{})
	now := time.Now()
	a, _ := st.Create("a", "", now)
	b, _ := st.Create("b", "", now)
	if got := ByPrefix(st, a.ID); len(got) != 1 || got[0] != a {
		t.Errorf("by the whole id: %v", got)
	}
	if got := ByPrefix(st, b.ID[:8]); len(got) != 1 || got[0] != b {
		t.Errorf("by a prefix: %v", got)
	}
	if got := ByPrefix(st, ""); len(got) != 2 {
		t.Errorf("every id starts with the empty prefix: %d sessions", len(got))
	}
	if got := ByPrefix(st, "!"); len(got) != 0 {
		t.Errorf("no id has '!': %v", got)
	}
	a.Begin()
	if n, _ := a.Activity(); n != 1 {
		t.Errorf("activity %d after Begin", n)
	}
	a.End(now.Add(time.Second))
	if n, last := a.Activity(); n != 0 || !last.Equal(now.Add(time.Second)) {
		t.Errorf("activity %d, last %v after End", n, last)
	}
}
