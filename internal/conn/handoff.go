package conn

import (
	"context"
	"errors"
)

// Portable connections. A session whose connection any replica of the
// gateway can serve is portable: its Backend hands the front, through a
// sink in the context of Open, the state another replica needs to resume
// the connection (Backend.Resume) without a new initialize upstream. The
// state is the Backend's own encoding, opaque to the front, which seals it
// into the session id or keeps it in a shared store. A session whose
// connection lives in this process (a stdio process, a legacy SSE stream,
// an endpoint's member sessions) is owner-bound: its Backend never calls
// the sink and its Resume fails with ErrNotPortable (embed OwnerBound).

type handoffKey struct{}

// WithHandoff returns ctx carrying sink, the handoff sink the front gives
// Backend.Open. A portable Backend calls sink with its state synchronously
// before Open returns, and again, from any goroutine, whenever the state
// changes (a remote's upstream session was renewed); it never calls sink
// under a lock it holds while blocking, since sink may write to a store.
// sink must not block for long and must be safe for concurrent use.
func WithHandoff(ctx context.Context, sink func(state []byte)) context.Context {
	return context.WithValue(ctx, handoffKey{}, sink)
}

// Handoff returns the handoff sink of ctx, or nil when the front gave none
// (a single replica: nobody else will resume the session, so a Backend
// need not encode its state at all). The state given to it is the
// caller's to keep: the sink copies what it retains.
func Handoff(ctx context.Context) func(state []byte) {
	sink, _ := ctx.Value(handoffKey{}).(func(state []byte))
	return sink
}

// Newer state for a connection held. Several replicas may hold one
// portable session at once (each resumed it to serve a request), and a
// change made through one (a reverse-bridge session's logging/setLevel or
// subscription, a remote's renewed upstream session) must reach the
// others' connections, not only the replicas that resume the session
// later. The front versions each state its sink receives, keeps the
// newest in the shared store, and tells the replicas holding the session;
// each gives the newer state to its connection through the function the
// Backend registered for it.

type stateUpdatesKey struct{}

// WithStateUpdates returns ctx carrying register, which the front puts in
// the context of Backend.Open and Backend.Resume next to the handoff sink.
// A portable Backend calls register, before Open or Resume returns, with
// apply: the function that gives the connection it returns a newer
// state, one that another replica's connection of the same session handed
// to its sink (the Backend's own encoding).
//
// The front calls apply only with a state newer than the last one the
// connection handed off or was given (an older one is dropped before it),
// one call at a time per connection, never under a lock, from a goroutine
// the front's sessions share: apply must not block for long (it starts
// the I/O it needs and returns). apply makes the connection what the
// state says (a logging level, a set of subscriptions, an upstream
// session id) without a new initialize upstream and without telling the
// handoff sink (the state is the store's already). A state apply cannot
// use (it does not parse, or is of another kind of session) leaves the
// connection as it is; so does a call after the connection closed, and a
// state the connection has already (the front gives a connection its own
// newest state again when the connection changed while apply ran, so
// that an older state applied late cannot undo that change). apply may
// be called as soon as it is registered, before Open or Resume returns.
func WithStateUpdates(ctx context.Context, register func(apply func(state []byte))) context.Context {
	return context.WithValue(ctx, stateUpdatesKey{}, register)
}

// OnStateUpdate returns the registration of ctx (WithStateUpdates), or
// nil when the front gives none (a single replica: no other replica
// changes the session).
func OnStateUpdate(ctx context.Context) func(apply func(state []byte)) {
	register, _ := ctx.Value(stateUpdatesKey{}).(func(apply func(state []byte)))
	return register
}

// ErrNotPortable is Resume's error on a Backend whose sessions are
// owner-bound: only the replica that opened the session can serve it.
var ErrNotPortable = errors.New("mcpgate: the session is bound to the replica that opened it")

// OwnerBound is the Resume of a Backend whose sessions are owner-bound:
// embed it.
type OwnerBound struct{}

// Resume fails with ErrNotPortable.
func (OwnerBound) Resume(context.Context, Stream, []byte) (Conn, error) { return nil, ErrNotPortable }

// Resume is Open for a session resumed from state: the layer applies to
// it as to the connection the session had on the replica that opened it.
func (w *wrapped) Resume(ctx context.Context, general Stream, state []byte) (Conn, error) {
	general, mw := w.layer(ctx, general)
	c, err := w.Backend.Resume(ctx, general, state)
	if err != nil {
		return nil, err
	}
	return mw(c), nil
}

// ReasonDeleted is the reason the front closes a session its client
// deleted (CloseWith), here or, for a portable session, on another
// replica. A portable backend, which otherwise leaves its upstream session
// to the other replicas when a connection closes, ends it at its server
// for this reason.
const ReasonDeleted = "the client deleted the session"
