package conn

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recStream records what a call delivers, and what it must never see: a
// second final answer, or a message after the final one.
type recStream struct {
	mu      sync.Mutex
	replies [][]byte
	sends   int
	late    int // messages after the final answer
}

func (s *recStream) Send([]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.replies) > 0 {
		s.late++
	}
	s.sends++
}

func (s *recStream) Reply(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.replies) > 0 {
		s.late++
	}
	s.replies = append(s.replies, msg)
}

func (s *recStream) got() (replies [][]byte, sends, late int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.replies...), s.sends, s.late
}

// event is one of the ways a call can end.
type event int

const (
	evReply   event = iota // the server's answer
	evTimeout              // the connection's deadline fails it
	evCancel               // the client's notifications/cancelled: Reply(nil)
	evClose                // the session ends
	evAbandon              // the client left
	numEvents
)

func (e event) String() string {
	return [...]string{"reply", "timeout", "cancel", "close", "abandon"}[e]
}

// permutations returns every order of events.
func permutations(evs []event) [][]event {
	if len(evs) <= 1 {
		return [][]event{append([]event(nil), evs...)}
	}
	var out [][]event
	for i, first := range evs {
		rest := append(append([]event(nil), evs[:i]...), evs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]event{first}, p...))
		}
	}
	return out
}

// TestCallsEveryOrder plays the five ways a call can end in every order
// (120), and each order's prefixes: the first one decides what the client
// gets, exactly once or (abandoned) not at all; every later answer is
// dropped and counted; Cancel runs exactly once, before the answer; and
// the table is empty.
func TestCallsEveryOrder(t *testing.T) {
	all := []event{evReply, evTimeout, evCancel, evClose, evAbandon}
	perms := permutations(all)
	if len(perms) != 120 {
		t.Fatalf("%d orders, want 120", len(perms))
	}
	for _, order := range perms {
		for n := 1; n <= len(order); n++ {
			order := order[:n]
			t.Run(fmt.Sprint(order), func(t *testing.T) {
				var tab Calls[int]
				out := &recStream{}
				var cancels atomic.Int32
				cl := &Call[int]{ID: []byte(`"a"`), Out: out, Cancel: func() {
					if replies, _, _ := out.got(); len(replies) != 0 {
						t.Error("Cancel ran after the answer was delivered")
					}
					cancels.Add(1)
				}}
				if !tab.Add(cl) {
					t.Fatal("Add refused on an open table")
				}
				cl.Send([]byte("progress"))
				for _, ev := range order {
					switch ev {
					case evReply:
						cl.Reply(jsonrpc.Response(cl.ID, []byte(`{}`)))
					case evTimeout:
						cl.Fail(protocol.CodeServerError, "timed out")
					case evCancel:
						cl.Reply(nil)
					case evClose:
						tab.Close(protocol.CodeServerError, "mcpgate: closed")
					case evAbandon:
						tab.Abandon(out)
					}
				}
				cl.Send([]byte("late progress"))

				replies, sends, late := out.got()
				if late != 0 {
					t.Errorf("%d messages after the final answer", late)
				}
				if sends != 1 {
					t.Errorf("%d messages before the final answer, want 1", sends)
				}
				first := order[0]
				var want []byte
				switch first {
				case evReply:
					want = jsonrpc.Response(cl.ID, []byte(`{}`))
				case evTimeout:
					want = jsonrpc.ErrorResponse(cl.ID, protocol.CodeServerError, "timed out")
				case evClose:
					want = jsonrpc.ErrorResponse(cl.ID, protocol.CodeServerError, "mcpgate: closed")
				}
				switch {
				case first == evAbandon:
					if len(replies) != 0 {
						t.Errorf("an abandoned call got %d answers", len(replies))
					}
				case len(replies) != 1:
					t.Errorf("%d answers, want exactly 1", len(replies))
				case !bytes.Equal(replies[0], want):
					t.Errorf("answer %q, want %q (the first: %v)", replies[0], want, first)
				}
				var later int64 // answers after the first: each dropped
				for _, ev := range order[1:] {
					if ev == evReply || ev == evTimeout || ev == evCancel {
						later++
					}
				}
				if got := tab.Dropped(); got != later {
					t.Errorf("Dropped = %d, want %d", got, later)
				}
				if got := cancels.Load(); got != 1 {
					t.Errorf("Cancel ran %d times, want once", got)
				}
				if !cl.Done() {
					t.Error("the call is not done")
				}
				if n := tab.Len(); n != 0 {
					t.Errorf("%d calls left in the table", n)
				}
			})
		}
	}
}

// TestCallsAddAfterClose: a closed table takes no call, and answers
// nothing for it (the caller refuses it on its stream).
func TestCallsAddAfterClose(t *testing.T) {
	var tab Calls[int]
	tab.Close(protocol.CodeServerError, "closed")
	tab.Close(protocol.CodeServerError, "again") // only the first counts
	out := &recStream{}
	if tab.Add(&Call[int]{ID: []byte("1"), Out: out}) {
		t.Fatal("Add accepted a call on a closed table")
	}
	if replies, _, _ := out.got(); len(replies) != 0 {
		t.Fatalf("a refused call got %d answers from the table", len(replies))
	}
}

// TestCallsAbandonOneStream: Abandon ends the calls of one stream only.
func TestCallsAbandonOneStream(t *testing.T) {
	var tab Calls[int]
	a, b := &recStream{}, &recStream{}
	var calls []*Call[int]
	for i := range 6 {
		out := a
		if i%2 == 1 {
			out = b
		}
		cl := &Call[int]{ID: []byte(strconv.Itoa(i)), Out: out}
		tab.Add(cl)
		calls = append(calls, cl)
	}
	if got := tab.On(a); len(got) != 3 {
		t.Fatalf("On found %d calls, want 3", len(got))
	}
	tab.Abandon(a)
	if got := tab.On(a); len(got) != 0 {
		t.Fatalf("%d calls on the stream after Abandon", len(got))
	}
	if got := tab.On(b); len(got) != 3 {
		t.Fatalf("Abandon of one stream left %d of the other's 3 calls", len(got))
	}
	for _, cl := range calls {
		cl.Reply(jsonrpc.Response(cl.ID, []byte(`{}`)))
	}
	if replies, _, _ := a.got(); len(replies) != 0 {
		t.Errorf("the abandoned stream got %d answers", len(replies))
	}
	if replies, _, _ := b.got(); len(replies) != 3 {
		t.Errorf("the other stream got %d answers, want 3", len(replies))
	}
	if got := tab.Dropped(); got != 3 {
		t.Errorf("Dropped = %d, want the 3 abandoned calls' replies", got)
	}
}

// TestCallsFind finds a pending call, by a match and by id, and none once
// it is answered; ByID finds the first of two calls with one id, and the
// second once the first ended.
func TestCallsFind(t *testing.T) {
	var tab Calls[int]
	cl := &Call[int]{ID: []byte(`"x"`), Out: &recStream{}}
	tab.Add(cl)
	byID := func(c *Call[int]) bool { return bytes.Equal(c.ID, []byte(`"x"`)) }
	if tab.Find(byID) != cl || tab.ByID([]byte(`"x"`)) != cl {
		t.Fatal("Find or ByID missed the pending call")
	}
	twin := &Call[int]{ID: []byte(`"x"`), Out: &recStream{}}
	tab.Add(twin)
	if tab.ByID([]byte(`"x"`)) != cl {
		t.Fatal("ByID did not find the first call of the id")
	}
	cl.Reply(nil)
	if tab.Find(byID) != twin {
		t.Fatal("Find did not find the other call of the id")
	}
	twin.End()
	if tab.Find(byID) != nil || tab.ByID([]byte(`"x"`)) != nil {
		t.Fatal("Find or ByID returned an ended call")
	}
}

// TestCallsRace answers many calls from every side at once (the server,
// a timer, the client's cancel, Abandon of half the streams, Close): each
// stream gets at most one final answer and nothing after it, each stream
// that was not abandoned gets exactly one, and the answers given plus the
// answers dropped are all the answers tried. Run with -race.
func TestCallsRace(t *testing.T) {
	const n = 200
	var tab Calls[int]
	outs := make([]*recStream, n)
	calls := make([]*Call[int], n)
	var cancels atomic.Int32
	for i := range n {
		outs[i] = &recStream{}
		calls[i] = &Call[int]{ID: []byte(strconv.Itoa(i)), Out: outs[i], Cancel: func() { cancels.Add(1) }}
		if !tab.Add(calls[i]) {
			t.Fatal("Add refused")
		}
	}
	var tries atomic.Int64 // Reply and Fail calls
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, cl := range calls {
		wg.Go(func() {
			<-start
			cl.Send([]byte("p"))
			cl.Reply(jsonrpc.Response(cl.ID, []byte(`{}`)))
			tries.Add(1)
		})
		wg.Go(func() {
			<-start
			cl.Fail(protocol.CodeServerError, "timed out")
			tries.Add(1)
		})
		wg.Go(func() {
			<-start
			cl.Reply(nil)
			tries.Add(1)
		})
		if i%2 == 0 {
			wg.Go(func() {
				<-start
				tab.Abandon(outs[i])
			})
		}
	}
	wg.Go(func() {
		<-start
		tab.Close(protocol.CodeServerError, "closed")
	})
	close(start)
	wg.Wait()

	var answered int64
	for i, out := range outs {
		replies, _, late := out.got()
		if late != 0 {
			t.Errorf("call %d: %d messages after its final answer", i, late)
		}
		if len(replies) > 1 {
			t.Errorf("call %d: %d final answers", i, len(replies))
		}
		if i%2 == 1 && len(replies) != 1 {
			t.Errorf("call %d (not abandoned): %d final answers, want 1", i, len(replies))
		}
		answered += int64(len(replies))
	}
	// Each call ended once: by a try (answered), by Close (answered), or
	// by Abandon (no answer), and Cancel ran once for each. Every try but
	// those that ended a call is dropped, and so is Close's answer to a
	// call a try or Abandon ended after Close took it: at least
	// 3n - answered, at most n more.
	if c := cancels.Load(); c != n {
		t.Errorf("Cancel ran %d times for %d calls", c, n)
	}
	if d, lo := tab.Dropped(), 3*n-answered; d < lo || d > lo+n {
		t.Errorf("Dropped = %d, want between %d and %d (%d answered)", d, lo, lo+n, answered)
	}
	if tries.Load() != 3*n {
		t.Errorf("%d tries, want %d", tries.Load(), 3*n)
	}
	if tab.Len() != 0 {
		t.Errorf("%d calls left in the table", tab.Len())
	}
	if tab.Add(&Call[int]{ID: []byte("late"), Out: &recStream{}}) {
		t.Error("Add accepted a call after Close")
	}
}

// nopStream discards what it is given.
type nopStream struct{}

func (nopStream) Send([]byte)  {}
func (nopStream) Reply([]byte) {}

// BenchmarkCalls is one request's life in the table: Add, one message,
// the answer (which takes it out of the table).
func BenchmarkCalls(b *testing.B) {
	var tab Calls[int]
	id, msg := []byte("1"), []byte(`{}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cl := &Call[int]{ID: id, Out: nopStream{}}
			tab.Add(cl)
			cl.Send(msg)
			cl.Reply(msg)
		}
	})
}

// replacedCall and replacedConn are the bookkeeping the table replaced
// (remoteConn's and reverseConn's, which were the same): a set of calls
// under the connection's mutex, a mutex per call; kept here to compare.
type replacedCall struct {
	out  Stream
	mu   sync.Mutex
	done bool
}

type replacedConn struct {
	mu    sync.Mutex
	calls map[*replacedCall]struct{}
}

func (cl *replacedCall) send(msg []byte) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.done {
		cl.out.Send(msg)
	}
}

func (cl *replacedCall) reply(msg []byte) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.done {
		cl.done = true
		cl.out.Reply(msg)
	}
}

// BenchmarkCallsReplaced is BenchmarkCalls with the replaced bookkeeping.
func BenchmarkCallsReplaced(b *testing.B) {
	c := &replacedConn{calls: map[*replacedCall]struct{}{}}
	msg := []byte(`{}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cl := &replacedCall{out: nopStream{}}
			c.mu.Lock()
			c.calls[cl] = struct{}{}
			c.mu.Unlock()
			cl.send(msg)
			cl.reply(msg)
			c.mu.Lock()
			delete(c.calls, cl)
			c.mu.Unlock()
		}
	})
}
