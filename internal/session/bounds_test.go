package session

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A flood of progress events never pushes a final reply out of a POST
// stream's buffer (it used to: the ring dropped the oldest event, final or not).
func TestStreamFloodKeepsFinalReply(t *testing.T) {
	st := newStream(1, 4, 1<<20, 2)
	st.Reply([]byte("r1"))
	for i := range 100 {
		st.Send(fmt.Appendf(nil, "p%d", i))
	}
	st.Reply([]byte("r2"))
	evs, done, err := st.Next(nil, 0)
	if !errors.Is(err, ErrLost) || !done {
		t.Fatalf("err %v done %v, want ErrLost and done", err, done)
	}
	var finals []string
	for _, ev := range evs {
		if ev.Final {
			finals = append(finals, string(ev.Data))
		}
	}
	if fmt.Sprint(finals) != "[r1 r2]" || len(evs) > 4 || st.Dropped() != 98 {
		t.Fatalf("finals %v, %d events kept, %d dropped", finals, len(evs), st.Dropped())
	}
}

// A 2025-03-26 batch with more requests than the stream keeps events is
// answered whole.
func TestStreamBatchLargerThanReplayIsAnswered(t *testing.T) {
	const n = 600
	st := newStream(1, 8, 1<<20, n)
	for i := range n {
		st.Reply(fmt.Appendf(nil, "r%d", i))
	}
	evs, done, err := st.Next(nil, 0)
	if err != nil || !done || len(evs) != n || string(evs[n-1].Data) != fmt.Sprint("r", n-1) {
		t.Fatalf("%d events, done %v, err %v", len(evs), done, err)
	}
}

func TestStreamBoundedInBytes(t *testing.T) {
	st := newStream(0, 1000, 10<<10, 0)
	big := bytes.Repeat([]byte("x"), 1000)
	for range 100 {
		st.Send(big)
	}
	if b := st.Bytes(); b > 10<<10 || b < 9<<10 {
		t.Fatalf("stream keeps %d bytes, bound %d", b, 10<<10)
	}
	if st.Dropped() == 0 {
		t.Fatal("drops not counted")
	}
}

// A standalone stream that overflowed before any GET opened it can still be
// opened: the reader starts at the oldest event kept.
func TestStandaloneOverflowBeforeFirstReader(t *testing.T) {
	st := newStream(0, 4, 1<<20, 0)
	for i := range 10 {
		st.Send(fmt.Appendf(nil, "m%d", i))
	}
	evs, _, err := st.Next(nil, st.Undelivered())
	if err != nil || len(evs) != 4 || string(evs[0].Data) != "m6" {
		t.Fatalf("first GET: %d events, err %v", len(evs), err)
	}
	if st.Undelivered() != 10 {
		t.Fatalf("undelivered mark %d, want 10", st.Undelivered())
	}
}

// ReplayEvents < 0: events wait for their first reader, then are let go.
func TestNegativeReplayKeepsNothingOnceDelivered(t *testing.T) {
	st := newStream(1, -1, 1<<20, 1)
	st.Send([]byte("p"))
	st.Reply([]byte("r"))
	if st.Bytes() == 0 {
		t.Fatal("undelivered events were not kept")
	}
	evs, done, err := st.Next(nil, 0)
	if err != nil || !done || len(evs) != 2 {
		t.Fatalf("%v %v %v", evs, done, err)
	}
	if st.Bytes() != 0 {
		t.Fatalf("%d bytes kept after delivery", st.Bytes())
	}
	if _, _, err := st.Next(nil, 0); !errors.Is(err, ErrLost) {
		t.Fatalf("replay: err %v, want ErrLost", err)
	}
}

// The legacy standalone stream lets go of finals a reader took, never of
// one not yet taken.
func TestStandaloneDropsOnlyDeliveredFinals(t *testing.T) {
	st := newStream(0, 2, 1<<20, 0)
	st.Expect(3)
	st.Reply([]byte("r1"))
	st.Reply([]byte("r2"))
	st.Reply([]byte("r3"))
	if evs, _, _ := st.Next(nil, 0); len(evs) != 3 || st.Settled() != true {
		t.Fatalf("%d events before any delivery, want all 3 finals", len(evs))
	}
	st.Expect(1)
	if st.Settled() {
		t.Fatal("settled with a request in flight")
	}
	st.Reply([]byte("r4"))
	if evs, _, _ := st.Next(nil, 3); len(evs) != 1 || st.Bytes() > 2*(2+eventOverhead) || !st.Settled() {
		t.Fatalf("%d events, %d bytes kept", len(evs), st.Bytes())
	}
}

// Finished streams nobody reads (kept for resumption) are evicted oldest
// first over the session's byte bound: 64 abandoned big replies used to stay.
func TestSessionEvictsAbandonedStreamsByBytes(t *testing.T) {
	store := NewStore(Limits{SessionReplayBytes: 1 << 20})
	s, _ := store.Create("x", "", time.Now())
	reply := bytes.Repeat([]byte("x"), 300<<10)
	waiting := s.NewStream(1, time.Now())
	waiting.Attach() // a connected reader waits for this one
	waiting.Reply(reply)
	var first *Stream
	for i := range 20 {
		st := s.NewStream(1, time.Now())
		if i == 0 {
			first = st
		}
		st.Reply(reply)
	}
	if b := s.Bytes(); b > 1<<20 {
		t.Fatalf("session keeps %d bytes, bound %d", b, 1<<20)
	}
	if s.Evicted() < 15 || s.Stream(first.ID()) != nil {
		t.Fatalf("evicted %d streams; oldest still there: %v", s.Evicted(), s.Stream(first.ID()) != nil)
	}
	if s.Stream(waiting.ID()) != waiting {
		t.Fatal("a stream with a reader waiting was evicted")
	}
	if evs, done, _ := waiting.Next(nil, 0); !done || len(evs) != 1 {
		t.Fatal("the waiting reader lost its reply")
	}
	waiting.Detach()
	s.Forget(waiting)
	if s.Bytes() > 1<<20 {
		t.Fatalf("%d bytes after forget", s.Bytes())
	}
}

// Closing a session after its connection answered: the replies appended
// before Close are still read, then the stream is done.
func TestCloseKeepsRepliesReadable(t *testing.T) {
	store := NewStore(Limits{})
	s, _ := store.Create("x", "", time.Now())
	st := s.NewStream(2, time.Now())
	st.Reply([]byte("r1"))
	if store.Delete(s.ID) != s || st.Closed() {
		t.Fatal("Delete closed the session's streams before its connection was closed")
	}
	st.Reply([]byte("error: session ended"))
	s.Close("deleted")
	s.Close("again") // idempotent
	st.Reply([]byte("late"))
	evs, done, err := st.Next(nil, 0)
	if err != nil || !done || len(evs) != 2 || s.CloseReason() != "deleted" {
		t.Fatalf("%d events done %v err %v reason %q", len(evs), done, err, s.CloseReason())
	}
	if s.NewStream(1, time.Now()).Attach() {
		t.Fatal("a stream of a closed session accepted a reader")
	}
}

// TestBackloggedOnlyWithUnreadFinals: the standalone stream goes over its
// byte bound only with final replies no reader took; once a reader takes
// them, the next append trims it back.
func TestBackloggedOnlyWithUnreadFinals(t *testing.T) {
	st := newStream(0, 512, 1000, 0)
	for range 50 {
		st.Send(make([]byte, 100)) // droppable: never a backlog
	}
	if st.Backlogged() {
		t.Fatalf("backlogged with %d bytes of progress events", st.Bytes())
	}
	for range 20 {
		st.Reply(make([]byte, 100))
	}
	if !st.Backlogged() {
		t.Fatalf("not backlogged with %d bytes of unread replies", st.Bytes())
	}
	evs, _, _ := st.Next(nil, 0)
	st.Send([]byte("x"))
	if st.Backlogged() || len(evs) == 0 {
		t.Fatalf("still backlogged (%d bytes) after a reader took %d events", st.Bytes(), len(evs))
	}
}
