package session

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// finished returns a stream of s whose one reply was read and whose reader
// left at now, given to Finish.
func finished(s *Session, now time.Time) *Stream {
	st := s.NewStream(1, now)
	st.Attach()
	st.Reply([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	st.Next(nil, 0)
	st.Detach()
	s.Finish(st, now)
	return st
}

// A finished stream stays resumable, its bytes charged, for its grace; the
// first NewStream after that drops it and its bytes.
func TestFinishKeepsStreamForGrace(t *testing.T) {
	store := NewStore(Limits{ResumeGrace: 10 * time.Second})
	t0 := time.Now()
	s, _ := store.Create("x", "", t0)
	st := finished(s, t0)
	kept := st.Bytes()

	s.NewStream(1, t0.Add(9*time.Second)) // no reply yet: keeps no bytes
	if s.Stream(st.ID()) != st || s.Bytes() != kept {
		t.Fatalf("within its grace: stream kept %v, session bytes %d, want %d", s.Stream(st.ID()) == st, s.Bytes(), kept)
	}
	if evs, done, err := st.Next(nil, 0); len(evs) != 1 || !done || err != nil {
		t.Fatalf("resuming within the grace: %d events, done %v, %v", len(evs), done, err)
	}
	s.NewStream(1, t0.Add(10*time.Second))
	if s.Stream(st.ID()) != nil || s.Bytes() != 0 {
		t.Fatalf("after its grace: stream kept %v, session bytes %d", s.Stream(st.ID()) != nil, s.Bytes())
	}
	if s.Evicted() != 0 {
		t.Fatalf("a stream whose grace ended counted as evicted: %d", s.Evicted())
	}
}

// Store.Prune drops, from sessions that open no new stream, the finished
// streams whose grace ended, and only those; Finish again restarts a grace.
func TestStorePrune(t *testing.T) {
	store := NewStore(Limits{})
	t0 := time.Now()
	a, _ := store.Create("x", "", t0)
	b, _ := store.Create("x", "", t0)
	old := finished(a, t0)
	again := finished(a, t0)
	young := finished(b, t0.Add(5*time.Second))
	a.Finish(again, t0.Add(5*time.Second)) // resumed and finished again

	Prune(store, t0.Add(DefaultResumeGrace))
	if a.Stream(old.ID()) != nil || a.Stream(again.ID()) != again || b.Stream(young.ID()) != young {
		t.Fatalf("after the first grace: old kept %v, again kept %v, young kept %v",
			a.Stream(old.ID()) != nil, a.Stream(again.ID()) == again, b.Stream(young.ID()) == young)
	}
	Prune(store, t0.Add(5*time.Second+DefaultResumeGrace))
	if a.Bytes() != 0 || b.Bytes() != 0 || a.Stream(again.ID()) != nil || b.Stream(young.ID()) != nil {
		t.Fatalf("after every grace: bytes %d and %d", a.Bytes(), b.Bytes())
	}
}

// A stream kept with no events for replay, or a session with a negative
// grace, has nothing to resume: Finish forgets it at once.
func TestFinishWithoutReplay(t *testing.T) {
	for _, l := range []Limits{{ReplayEvents: -1}, {ResumeGrace: -1}} {
		s, _ := NewStore(l).Create("x", "", time.Now())
		st := finished(s, time.Now())
		if s.Stream(st.ID()) != nil || s.Bytes() != 0 {
			t.Fatalf("%+v: stream kept %v, %d bytes", l, s.Stream(st.ID()) != nil, s.Bytes())
		}
	}
}

// The count bound cuts a grace short, oldest finished first, without
// counting the stream as evicted (it was written out).
func TestGraceCutByCountBound(t *testing.T) {
	t0 := time.Now()
	s, _ := NewStore(Limits{}).Create("x", "", t0)
	first := finished(s, t0)
	for range maxRetainedStreams {
		finished(s, t0)
	}
	if s.Stream(first.ID()) != nil || s.Evicted() != 0 {
		t.Fatalf("oldest kept %v, evicted %d", s.Stream(first.ID()) != nil, s.Evicted())
	}
}

// TestSessionBytesReturnToZero with finished streams in their grace, a
// clock that moves, and prunes: once every grace ended the session counts
// only what its standalone stream keeps.
func TestSessionBytesReturnToZeroWithGrace(t *testing.T) {
	for _, keep := range []int{4, -1} {
		rng := rand.New(rand.NewPCG(2, uint64(keep+10)))
		now := time.Now()
		store := NewStore(Limits{ReplayEvents: keep, ReplayBytes: 8 << 10, SessionReplayBytes: 32 << 10})
		s, _ := store.Create("x", "", now)
		var live []*Stream
		for range 3000 {
			switch op := rng.IntN(9); {
			case op == 0 || len(live) == 0:
				st := s.NewStream(1+rng.IntN(2), now)
				st.Attach()
				live = append(live, st)
			case op == 1:
				live[rng.IntN(len(live))].Send(bytes.Repeat([]byte("p"), rng.IntN(2000)))
			case op == 2:
				live[rng.IntN(len(live))].Reply(bytes.Repeat([]byte("r"), rng.IntN(6000)))
			case op == 3:
				live[rng.IntN(len(live))].Next(nil, 0)
			case op == 4:
				live[rng.IntN(len(live))].Detach()
			case op == 5:
				if st := live[rng.IntN(len(live))]; st.Complete() {
					s.Finish(st, now)
				}
			case op == 6:
				now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			case op == 7:
				s.Prune(now)
			default:
				s.General().Send(bytes.Repeat([]byte("g"), rng.IntN(500)))
			}
			if s.Bytes() < 0 {
				t.Fatalf("keep %d: session bytes went negative: %d", keep, s.Bytes())
			}
		}
		for _, st := range live {
			for !st.Complete() {
				st.Reply([]byte("end"))
			}
			st.Detach()
			s.Finish(st, now)
		}
		Prune(store, now.Add(DefaultResumeGrace))
		s.General().Next(nil, 0)
		if got, want := s.Bytes(), s.General().Bytes(); got != want {
			t.Fatalf("keep %d: session counts %d bytes, its standalone stream keeps %d and every grace ended", keep, got, want)
		}
	}
}
