package session

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Mirror sees the events after its seq that the stream keeps, then each
// one appended, in order, with complete set by the final that completes
// the stream; a second mirror is refused.
func TestMirrorSeesEveryEventInOrder(t *testing.T) {
	st := newStream(1, 8, 1<<20, 2)
	st.Send([]byte("p1"))
	st.Send([]byte("p2"))
	var seen []string
	var completes []bool
	fn := func(ev Event, complete bool) {
		seen = append(seen, fmt.Sprintf("%d:%s:%v", ev.Seq, ev.Data, ev.Final))
		completes = append(completes, complete)
	}
	if !st.Mirror(1, fn) {
		t.Fatal("Mirror refused")
	}
	if st.Mirror(0, fn) {
		t.Fatal("a second Mirror taken")
	}
	st.Reply([]byte("r1"))
	st.Send([]byte("p3"))
	st.Reply([]byte("r2"))
	want := []string{"2:p2:false", "3:r1:true", "4:p3:false", "5:r2:true"}
	if !slices.Equal(seen, want) {
		t.Fatalf("mirrored %q, want %q", seen, want)
	}
	if !slices.Equal(completes, []bool{false, false, false, true}) {
		t.Fatalf("complete flags %v, want only the last", completes)
	}
}

// NumberStreamsFrom numbers a session's next streams after its base.
func TestNumberStreamsFrom(t *testing.T) {
	s, err := NewStore(Limits{}).Create("x", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const base = 7 << 32
	s.NumberStreamsFrom(base)
	a, b := s.NewStream(1, time.Now()), s.NewStream(1, time.Now())
	if a.ID() != base+1 || b.ID() != base+2 || s.Stream(base+2) != b {
		t.Fatalf("streams %d, %d, want %d, %d", a.ID(), b.ID(), base+1, base+2)
	}
	s.NumberStreamsFrom(1) // below: ignored
	if c := s.NewStream(1, time.Now()); c.ID() != base+3 {
		t.Fatalf("stream %d after a lower base, want %d", c.ID(), base+3)
	}
}

// Unanswered: each request without a final reply the resuming client
// gets, exactly once; none for the requests it has or gets replayed.
func TestRecordUnanswered(t *testing.T) {
	ids := func(s ...string) [][]byte {
		var out [][]byte
		for _, x := range s {
			out = append(out, []byte(x))
		}
		return out
	}
	final := func(seq uint64, id string) Final {
		if id == "" {
			return Final{Seq: seq}
		}
		return Final{Seq: seq, ID: []byte(id)}
	}
	for _, c := range []struct {
		name string
		rec  Record
		want []string
	}{
		{"no reply written", Record{Requests: ids(`"a"`)}, []string{`"a"`}},
		{"reply before the resume point", Record{Requests: ids(`"a"`), Finals: []Final{final(3, `"a"`)}, After: 3}, nil},
		{"reply replayed", Record{Requests: ids(`"a"`), Finals: []Final{final(3, `"a"`)}, After: 1,
			Events: []Event{{Seq: 3, Data: []byte("r"), Final: true}}}, nil},
		{"reply written but trimmed", Record{Requests: ids(`"a"`), Finals: []Final{final(3, `"a"`)}, After: 1}, []string{`"a"`}},
		{"batch, one answered", Record{Requests: ids(`1`, `2`), Finals: []Final{final(2, `2`)}, After: 2}, []string{`1`}},
		{"cancelled alone", Record{Requests: ids(`1`), Finals: []Final{final(2, "")}}, nil},
		{"batch, one cancelled, one answered", Record{Requests: ids(`1`, `2`), Finals: []Final{final(2, ""), final(3, `2`)}, After: 3}, nil},
		{"batch, one cancelled, one lost", Record{Requests: ids(`1`, `2`), Finals: []Final{final(2, "")}, After: 2}, []string{`1`, `2`}},
	} {
		var got []string
		for _, id := range c.rec.Unanswered() {
			got = append(got, string(id))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
