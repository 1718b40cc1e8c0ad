package session

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestStreamKeepsOrderAndCompletes(t *testing.T) {
	st := newStream(1, 8, 1<<20, 2)
	st.Send([]byte("p1"))
	st.Reply([]byte("r1"))
	evs, done, err := st.Next(nil, 0)
	if err != nil || done || len(evs) != 2 || string(evs[0].Data) != "p1" || !evs[1].Final {
		t.Fatalf("after one reply of two: %v done=%v err=%v", evs, done, err)
	}
	st.Reply(nil) // a cancelled request still completes the stream
	evs, done, err = st.Next(nil, evs[1].Seq)
	if err != nil || !done || len(evs) != 1 || evs[0].Seq != 3 {
		t.Fatalf("after the last reply: %v done=%v err=%v", evs, done, err)
	}
	select {
	case <-st.Wake():
	default:
		t.Fatal("no wake-up after appends")
	}
}

func TestStreamDropsOldestAndReportsLoss(t *testing.T) {
	st := newStream(0, 4, 1<<20, 0)
	for i := range 10 {
		st.Send(fmt.Appendf(nil, "m%d", i))
	}
	if st.Dropped() != 6 {
		t.Fatalf("dropped %d, want 6", st.Dropped())
	}
	if evs, _, err := st.Next(nil, 2); !errors.Is(err, ErrLost) || len(evs) != 4 {
		t.Fatalf("resume from a dropped event: %d events, err %v, want the 4 kept and ErrLost", len(evs), err)
	}
	evs, _, err := st.Next(nil, 6)
	if err != nil || len(evs) != 4 || string(evs[0].Data) != "m6" {
		t.Fatalf("resume from the oldest kept: %v %v", evs, err)
	}
	if st.Undelivered() != 10 {
		t.Fatalf("undelivered mark %d, want 10", st.Undelivered())
	}
}

func TestStreamSingleReaderAndClose(t *testing.T) {
	st := newStream(0, 4, 1<<20, 0)
	if !st.Attach() || st.Attach() {
		t.Fatal("a second reader was allowed")
	}
	st.Detach()
	st.Close()
	st.Send([]byte("late"))
	evs, done, _ := st.Next(nil, 0)
	if !done || len(evs) != 0 || st.Attach() {
		t.Fatalf("closed stream: %v done=%v", evs, done)
	}
}

func TestEventIDRoundTrip(t *testing.T) {
	for _, c := range [][2]uint64{{0, 0}, {3, 17}, {1 << 40, 1<<64 - 1}} {
		if got := string(AppendEventID([]byte("x"), c[0], c[1])); got != "x"+EventID(c[0], c[1]) {
			t.Fatalf("AppendEventID %q, EventID %q", got, EventID(c[0], c[1]))
		}
		s, q, ok := ParseEventID(EventID(c[0], c[1]))
		if !ok || s != c[0] || q != c[1] {
			t.Fatalf("%v: got %d %d %v", c, s, q, ok)
		}
	}
	for _, bad := range []string{"", "1", "a-1", "1-b", "-1", "1-"} {
		if _, _, ok := ParseEventID(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestStoreLimitsExpiryAndIDs(t *testing.T) {
	now := time.Unix(1000, 0)
	st := NewStore(Limits{MaxSessions: 2, IdleTimeout: time.Minute, ReplayEvents: 8})
	a, err := st.Create("x", "", now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := st.Create("x", "", now)
	if _, err := st.Create("x", "", now); !errors.Is(err, ErrTooMany) {
		t.Fatalf("third session: %v", err)
	}
	if len(a.ID) < 32 || a.ID == b.ID {
		t.Fatalf("ids %q %q", a.ID, b.ID)
	}
	for _, c := range a.ID {
		if c < 0x21 || c > 0x7e {
			t.Fatalf("id %q has a non-visible character", a.ID)
		}
	}
	b.Begin() // busy: never idle
	if got := st.Expire(now.Add(2 * time.Minute)); len(got) != 1 || got[0] != a {
		t.Fatalf("expired %v, want only the idle session", got)
	}
	b.End(now.Add(2 * time.Minute))
	if got := st.Expire(now.Add(150 * time.Second)); len(got) != 0 {
		t.Fatal("a session expired right after its activity ended")
	}
	if got := st.Expire(now.Add(4 * time.Minute)); len(got) != 1 {
		t.Fatal("the session did not expire once idle")
	}
	if st.Len() != 0 || st.Delete(b.ID) != nil {
		t.Fatal("store not empty")
	}
}

func TestSessionRetainsBoundedStreams(t *testing.T) {
	st := NewStore(Limits{IdleTimeout: time.Minute, ReplayEvents: 8})
	s, _ := st.Create("x", "", time.Now())
	first := s.NewStream(1, time.Now())
	first.Reply([]byte("r"))
	for range maxRetainedStreams {
		s.NewStream(1, time.Now())
	}
	if s.Stream(first.ID()) != nil {
		t.Fatal("the oldest finished stream was not evicted")
	}
	if s.Stream(0) != s.General() {
		t.Fatal("stream 0 is not the standalone stream")
	}
	if got := st.DeleteAll(); len(got) != 1 || s.General().Closed() {
		t.Fatal("DeleteAll closed the session: its connection must close first")
	}
	s.Close("deleted")
	if _, done, _ := s.General().Next(nil, 0); !done || s.CloseReason() != "deleted" {
		t.Fatal("streams stay open after the session is closed")
	}
}

// FuzzParseEventID: Last-Event-ID comes from clients; parsing never panics
// and whatever parses round-trips.
func FuzzParseEventID(f *testing.F) {
	f.Add("0-0")
	f.Add("12-345")
	f.Add("18446744073709551615-1")
	f.Add("-")
	f.Fuzz(func(t *testing.T, id string) {
		s, q, ok := ParseEventID(id)
		if !ok {
			return
		}
		s2, q2, ok2 := ParseEventID(EventID(s, q))
		if !ok2 || s2 != s || q2 != q {
			t.Fatalf("%q -> %d %d does not round-trip", id, s, q)
		}
	})
}

// TestAttachWait: a second reader waits for the first to detach, within its
// bound; with the first still attached it gives up at the bound, and a
// closed stream never attaches.
func TestAttachWait(t *testing.T) {
	st := newStream(1, 8, 1<<20, 1)
	if !st.Attach() {
		t.Fatal("first Attach failed")
	}
	if st.AttachWait(context.Background(), 20*time.Millisecond) {
		t.Fatal("attached while another reader is")
	}
	got := make(chan bool, 1)
	go func() { got <- st.AttachWait(context.Background(), 10*time.Second) }()
	testkit.WaitFor(t, "the second reader to wait", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.free != nil
	})
	st.Detach()
	select {
	case ok := <-got:
		if !ok || !st.Attached() {
			t.Fatal("the waiting reader did not attach after the first detached")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AttachWait did not return after Detach")
	}
	st.Detach()
	st.Close()
	if st.AttachWait(context.Background(), time.Second) {
		t.Fatal("attached to a closed stream")
	}
}

// A session keeps the owner it was created for; Create's has none.
func TestCreateOwned(t *testing.T) {
	st := NewStore(Limits{MaxSessions: 1})
	s, err := st.Create("x", "token\x00alice", time.Now())
	if err != nil || s.Owner != "token\x00alice" || st.Lookup(s.ID) != s {
		t.Fatalf("Create: %v, owner %q", err, s.Owner)
	}
	if _, err := st.Create("x", "key\x00bob", time.Now()); !errors.Is(err, ErrTooMany) {
		t.Fatalf("Create beyond MaxSessions: %v", err)
	}
	st.Delete(s.ID)
	if s, _ := st.Create("x", "", time.Now()); s.Owner != "" {
		t.Fatalf("Create gives owner %q", s.Owner)
	}
}
