package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/session"
)

// open admits, creates and commits one session of principal key.
func open(t testing.TB, l *Limiter, st *session.Store, key string) (*session.Session, *Refusal) {
	t.Helper()
	commit, ref := l.AdmitSession(key)
	if ref != nil {
		return nil, ref
	}
	s, err := st.Create("srv", key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	commit(s)
	return s, nil
}

// TestSessionsCountedUntilRemoved: a principal's sessions count against
// MaxSessions until they leave the store, whichever way they leave; one
// that left before its commit is not counted at all; another principal
// has its own count.
func TestSessionsCountedUntilRemoved(t *testing.T) {
	l := New(&Config{MaxSessions: 2})
	st := session.NewStore(session.Limits{IdleTimeout: time.Minute})
	full := func(what string) {
		t.Helper()
		if _, ref := open(t, l, st, "p"); ref == nil || !strings.HasPrefix(ref.Msg, "too many sessions (limit 2)") {
			t.Fatalf("%s: a third session admitted (%v)", what, ref)
		}
	}
	a, _ := open(t, l, st, "p")
	open(t, l, st, "p")
	full("two open")
	if _, ref := open(t, l, st, "q"); ref != nil {
		t.Fatalf("another principal refused: %s", ref.Msg)
	}

	st.Delete(a.ID)
	if _, ref := open(t, l, st, "p"); ref != nil {
		t.Fatalf("after a Delete: %s", ref.Msg)
	}
	full("after the Delete's place was taken")

	st.DeleteTarget("srv") // all of p's and q's
	if _, ref := open(t, l, st, "p"); ref != nil {
		t.Fatalf("after DeleteTarget: %s", ref.Msg)
	}

	// Removed between its creation and its commit: never counted.
	commit, ref := l.AdmitSession("p")
	if ref != nil {
		t.Fatal(ref.Msg)
	}
	e, _ := st.Create("srv", "p", time.Now())
	st.Delete(e.ID)
	commit(e)
	if _, ref := open(t, l, st, "p"); ref != nil {
		t.Fatalf("a session removed before its commit still counts: %s", ref.Msg)
	}
	full("two open again")

	st.Expire(time.Now().Add(time.Hour))
	if _, ref := open(t, l, st, "p"); ref != nil {
		t.Fatalf("after Expire: %s", ref.Msg)
	}
	st.DeleteAll()
	l.mu.Lock()
	live := l.principals["p"].live
	l.mu.Unlock()
	if live != 0 {
		t.Errorf("%d sessions counted after DeleteAll, want 0", live)
	}
}

// BenchmarkAdmitSessionAmong10k opens and ends one session of a principal
// that holds 10,000 others (every client of a gateway without auth is one
// principal): the admission does not walk them.
func BenchmarkAdmitSessionAmong10k(b *testing.B) {
	l := New(&Config{MaxSessions: 20000})
	st := session.NewStore(session.Limits{})
	for range 10000 {
		open(b, l, st, "")
	}
	b.ReportAllocs()
	for b.Loop() {
		s, ref := open(b, l, st, "")
		if ref != nil {
			b.Fatal(ref.Msg)
		}
		st.Delete(s.ID)
	}
}
