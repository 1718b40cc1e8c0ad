package conn

import (
	"context"
	"errors"
)

// This file is the contract of portable sessions: a session another
// replica can serve. The front gives Backend.Open a handoff sink in its
// context; a backend whose sessions are portable hands it the state
// another replica needs to resume the connection (Backend.Resume), and
// again whenever that state changes. The state is the backend's own
// encoding, opaque to the front, and small (an upstream session id and a
// protocol version): the front seals it into the session id and keeps
// newer ones in the cluster's store.

// ErrNotPortable is Resume's error on a Backend whose sessions live where
// they were opened (a process of the gateway's, a legacy SSE stream).
var ErrNotPortable = errors.New("mcpgate: the server's sessions live in the replica that opened them")

// OwnerBound is the Resume of a Backend whose sessions are not portable:
// embed it.
type OwnerBound struct{}

// Resume fails with ErrNotPortable.
func (OwnerBound) Resume(context.Context, Stream, []byte) (Conn, error) {
	return nil, ErrNotPortable
}

type handoffKey struct{}

// WithHandoff returns ctx carrying sink, for Backend.Open.
func WithHandoff(ctx context.Context, sink func(state []byte)) context.Context {
	return context.WithValue(ctx, handoffKey{}, sink)
}

// Handoff returns the sink ctx carries, or one that drops the state. A
// portable backend calls it with the connection's state before Open
// returns, and again (from any goroutine, holding no lock it blocks
// under) whenever the state changes; it keeps the sink for the
// connection's life, not the ctx. The sink does not block and takes
// ownership of state.
func Handoff(ctx context.Context) func(state []byte) {
	if sink, ok := ctx.Value(handoffKey{}).(func([]byte)); ok && sink != nil {
		return sink
	}
	return func([]byte) {}
}
