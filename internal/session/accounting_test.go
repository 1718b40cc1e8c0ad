package session

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// Whatever mix of appends, reads, evictions (by bytes and by count) and
// forgets a session sees, its byte count never goes negative and returns to
// what its standalone stream keeps once every POST stream is let go.
func TestSessionBytesReturnToZero(t *testing.T) {
	for _, keep := range []int{4, -1} {
		rng := rand.New(rand.NewPCG(1, uint64(keep+10)))
		store := NewStore(Limits{ReplayEvents: keep, ReplayBytes: 8 << 10, SessionReplayBytes: 32 << 10})
		s, _ := store.Create("x", "", time.Now())
		var live []*Stream
		for range 2000 {
			switch op := rng.IntN(6); {
			case op == 0 || len(live) == 0:
				st := s.NewStream(1+rng.IntN(2), time.Now())
				st.Attach()
				live = append(live, st)
			case op == 1:
				live[rng.IntN(len(live))].Send(bytes.Repeat([]byte("p"), rng.IntN(2000)))
			case op == 2:
				live[rng.IntN(len(live))].Reply(bytes.Repeat([]byte("r"), rng.IntN(6000)))
			case op == 3:
				st := live[rng.IntN(len(live))]
				st.Next(nil, 0)
			case op == 4:
				live[rng.IntN(len(live))].Detach()
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
			s.Forget(st)
		}
		s.General().Next(nil, 0)
		if got, want := s.Bytes(), s.General().Bytes(); got != want {
			t.Fatalf("keep %d: session counts %d bytes, its standalone stream keeps %d and no POST stream is left", keep, got, want)
		}
	}
}
