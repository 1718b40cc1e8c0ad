package conn

import (
	"sync"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Calls is the exactly-once table of a connection's requests in flight: a
// request is registered (Add) before it is sent anywhere, and from then on
// the first answer wins, whoever gives it: the server's reply, a timeout, a
// cancellation, the session's end (Close). Later answers are dropped and
// counted (Dropped); a request whose client left is ended without one
// (Abandon).
//
// Locking: mu guards the set of calls and closed; each Call has its own
// mutex, held while a message is delivered to its Stream so that nothing
// follows the final answer. The table's lock is never held while a Stream
// is called or a Cancel runs, and never taken under a Call's lock. The zero
// Calls is ready to use; it must not be copied after first use.
type Calls struct {
	mu     sync.Mutex
	closed bool           // guarded by mu: Close ran; Add refuses
	calls  map[*Call]bool // guarded by mu: the calls not answered yet

	dropped atomic.Int64 // answers that came after the first
}

// Call is one request in a Calls table. ID and Out are static; Cancel,
// when set, stops the work for the request, and is called once by the
// table when the request is abandoned or its connection closed (not when
// it is answered: the worker that answered ends its own work).
type Call struct {
	ID     []byte // the client's id, byte for byte
	Out    Stream // where the request's messages and final answer go
	Cancel func()
	// Initialize marks a session's initialize, which its client may not
	// cancel (notifications/cancelled names it in vain): Find's callers
	// skip it.
	Initialize bool

	t    *Calls
	mu   sync.Mutex // held while delivering to Out
	done bool       // guarded by mu: answered, or abandoned
}

// Add registers cl, whose ID, Out and Cancel are set. It reports false,
// registering nothing and answering nothing, once the table is closed: the
// caller refuses the request itself (on Out, not through cl: a Call is
// answered through only once it was added).
func (t *Calls) Add(cl *Call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.calls == nil {
		t.calls = map[*Call]bool{}
	}
	cl.t = t
	t.calls[cl] = true
	return true
}

// forget removes cl from the table, if it is still there.
func (t *Calls) forget(cl *Call) {
	t.mu.Lock()
	delete(t.calls, cl)
	t.mu.Unlock()
}

// Send delivers a message about the request that is not its final answer,
// unless it was answered or abandoned.
func (cl *Call) Send(msg []byte) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.done {
		cl.Out.Send(msg)
	}
}

// Reply gives the request its final answer (nil: its client cancelled it,
// as Stream.Reply says) and reports whether this was the first; a later
// one is dropped and counted.
func (cl *Call) Reply(msg []byte) bool {
	cl.mu.Lock()
	if cl.done {
		cl.mu.Unlock()
		cl.t.dropped.Add(1)
		return false
	}
	cl.done = true
	cl.Out.Reply(msg)
	cl.mu.Unlock()
	cl.t.forget(cl)
	return true
}

// Fail answers the request with a JSON-RPC error, if it is the first
// answer.
func (cl *Call) Fail(code int, text string) bool {
	cl.mu.Lock()
	done := cl.done
	cl.mu.Unlock()
	if done { // no error response built for nothing
		cl.t.dropped.Add(1)
		return false
	}
	return cl.Reply(jsonrpc.ErrorResponse(cl.ID, code, text))
}

// Done reports whether the request was answered or abandoned.
func (cl *Call) Done() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.done
}

// Find returns the first call still pending for which match is true, or
// nil. match runs under the table's lock: it must only read the Call.
func (t *Calls) Find(match func(cl *Call) bool) *Call {
	t.mu.Lock()
	defer t.mu.Unlock()
	for cl := range t.calls {
		if match(cl) {
			return cl
		}
	}
	return nil
}

// Abandon ends, without an answer, the calls answering on out (their
// client disconnected and cannot resume), calls their Cancel, and returns
// them, for what else the caller cancels (a member's own Abandon).
func (t *Calls) Abandon(out Stream) []*Call {
	t.mu.Lock()
	var mine []*Call
	for cl := range t.calls {
		if cl.Out == out {
			mine = append(mine, cl)
			delete(t.calls, cl)
		}
	}
	t.mu.Unlock()
	for _, cl := range mine {
		cl.mu.Lock()
		cl.done = true
		cl.mu.Unlock()
		if cl.Cancel != nil {
			cl.Cancel()
		}
	}
	return mine
}

// Close refuses every later Add, answers every call still pending with a
// JSON-RPC error of code and text, and calls its Cancel. It does not wait
// for the calls' work. Only the first Close does anything.
func (t *Calls) Close(code int, text string) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	calls := t.calls
	t.calls = nil
	t.mu.Unlock()
	for cl := range calls {
		cl.Fail(code, text)
		if cl.Cancel != nil {
			cl.Cancel()
		}
	}
}

// Len returns the number of calls not answered yet.
func (t *Calls) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

// Dropped returns the number of answers dropped because another came
// first.
func (t *Calls) Dropped() int64 { return t.dropped.Load() }
