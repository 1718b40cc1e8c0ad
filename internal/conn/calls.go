package conn

import (
	"sync"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Calls is the exactly-once table of a connection's requests in flight: a
// request is registered (Add) before it is sent anywhere, and from then on
// it ends once, whoever ends it first: an answer (the server's reply, a
// timeout, a cancellation by its client), Abandon (its client left: no
// answer) or Close (the session's end). Later answers are dropped and
// counted (Dropped). When a call ends, the table forgets it and runs its
// Cancel, once, before its answer is delivered: the work for it stops and
// what it holds is released before its client hears of it.
//
// Locking: mu guards the table; each Call's mu guards its done flag and is
// held while a message that is not its final answer is delivered, so that
// nothing follows the final answer (which is delivered after done is set,
// without a lock). No lock of the table is held while a Stream is called
// or a Cancel runs, and the table's lock is never taken under a Call's.
// The zero Calls is ready to use; it must not be copied after first use.
type Calls[T any] struct {
	mu     sync.Mutex
	closed bool                // guarded by mu: Close ran; Add refuses
	calls  map[*Call[T]]bool   // guarded by mu: the calls not ended
	byID   map[string]*Call[T] // guarded by mu: a call of each id (the first added), for ByID

	dropped atomic.Int64 // answers that came after the first
}

// Call is one request in a Calls table, with the connection's own Data
// about it. Its fields are set before Add and not changed after.
type Call[T any] struct {
	ID  []byte // the client's id, byte for byte
	Out Stream // where the request's messages and final answer go
	// Cancel, when set, is run once when the call ends, however it ends,
	// before its answer (if any) is delivered: it stops the work for the
	// request (closes its POST, ends its context) and releases what the
	// connection holds for it. It must not block, nor call the table.
	Cancel func()
	// Data is the connection's own about the request.
	Data T

	t    *Calls[T]
	mu   sync.Mutex
	done bool // guarded by mu: ended
}

// Add registers cl. It reports false, registering nothing and answering
// nothing, once the table is closed: the caller refuses the request itself
// (on Out: a Call is answered through only once it was added).
func (t *Calls[T]) Add(cl *Call[T]) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.calls == nil {
		t.calls, t.byID = map[*Call[T]]bool{}, map[string]*Call[T]{}
	}
	cl.t = t
	t.calls[cl] = true
	if t.byID[string(cl.ID)] == nil {
		t.byID[string(cl.ID)] = cl
	}
	return true
}

// end claims cl for whoever ends it: false when it ended already.
func (cl *Call[T]) end() bool {
	cl.mu.Lock()
	if cl.done {
		cl.mu.Unlock()
		return false
	}
	cl.done = true
	cl.mu.Unlock()
	t := cl.t
	t.mu.Lock()
	delete(t.calls, cl)
	if t.byID[string(cl.ID)] == cl {
		delete(t.byID, string(cl.ID))
	}
	t.mu.Unlock()
	if cl.Cancel != nil {
		cl.Cancel()
	}
	return true
}

// Send delivers a message about the request that is not its final answer,
// unless the call ended.
func (cl *Call[T]) Send(msg []byte) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.done {
		cl.Out.Send(msg)
	}
}

// Reply gives the request its final answer (nil: its client cancelled it,
// as Stream.Reply says) and reports whether this ended it; an answer to a
// call that ended already is dropped and counted.
func (cl *Call[T]) Reply(msg []byte) bool {
	if !cl.end() {
		cl.t.dropped.Add(1)
		return false
	}
	cl.Out.Reply(msg)
	return true
}

// Fail is Reply with a JSON-RPC error of code and text (built only for a
// call that has not ended).
func (cl *Call[T]) Fail(code int, text string) bool {
	if !cl.end() {
		cl.t.dropped.Add(1)
		return false
	}
	cl.Out.Reply(jsonrpc.ErrorResponse(cl.ID, code, text))
	return true
}

// End ends the call without an answer (its client cannot get one), and
// reports whether this ended it.
func (cl *Call[T]) End() bool { return cl.end() }

// Done reports whether the call ended.
func (cl *Call[T]) Done() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.done
}

// ByID returns the first call added with id that has not ended, or nil.
// A later call with the same id, added while the first was pending, is
// not found here (Find finds it).
func (t *Calls[T]) ByID(id []byte) *Call[T] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[string(id)]
}

// Find returns a call not ended for which match is true, or nil. match
// runs under the table's lock: it must only read the Call.
func (t *Calls[T]) Find(match func(cl *Call[T]) bool) *Call[T] {
	t.mu.Lock()
	defer t.mu.Unlock()
	for cl := range t.calls {
		if match(cl) {
			return cl
		}
	}
	return nil
}

// On returns the calls not ended that answer on out, without ending them.
func (t *Calls[T]) On(out Stream) []*Call[T] {
	t.mu.Lock()
	defer t.mu.Unlock()
	var mine []*Call[T]
	for cl := range t.calls {
		if cl.Out == out {
			mine = append(mine, cl)
		}
	}
	return mine
}

// Abandon ends, without an answer, the calls answering on out (their
// client disconnected and cannot resume).
func (t *Calls[T]) Abandon(out Stream) {
	for _, cl := range t.On(out) {
		cl.End()
	}
}

// Close refuses every later Add and answers every call not ended with a
// JSON-RPC error of code and text. It does not wait for the calls' work.
// Only the first Close does anything.
func (t *Calls[T]) Close(code int, text string) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	calls := make([]*Call[T], 0, len(t.calls))
	for cl := range t.calls {
		calls = append(calls, cl)
	}
	t.mu.Unlock()
	for _, cl := range calls {
		cl.Fail(code, text)
	}
}

// Len returns the number of calls not ended.
func (t *Calls[T]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

// Dropped returns the number of answers dropped because the call had
// ended.
func (t *Calls[T]) Dropped() int64 { return t.dropped.Load() }
