package conn

import "context"

// Who carries a portable session's server-to-client stream. Messages a
// server sends outside any request reach a client on the session's
// standalone stream (Backend.Open's general), which the client holds at
// one replica at a time; and a server lets one reader hold its side of
// that stream (an upstream Streamable HTTP session answers a second
// standalone GET with 409). So a connection resumed to serve some of a
// session's requests must not read the server's stream until the
// client's own standalone stream is at its replica: replicas that only
// serve requests would otherwise contend for the server's one stream, and
// the one that got it would receive messages its client never reads.

type generalHeldKey struct{}

// WithGeneralHeld returns ctx carrying register, which the front puts in
// the context of Backend.Resume when it runs more than one replica. A
// portable Backend whose connection reads the server's messages not tied
// to a request from an upstream stream only one reader may hold calls
// register, before Resume returns, with held: the function the front calls
// with true when the client's standalone stream attaches at this replica
// (the connection now carries the session's server-to-client messages:
// it opens the upstream stream) and with false when that stream detaches
// (another replica may take the upstream stream: the connection lets go
// of it). Until the first true the connection reads no such stream.
//
// The front calls held in order, true and false alternating from true,
// one call at a time, never under a lock; held must not block (it starts
// the I/O it needs and returns). A call after the connection closed does
// nothing. A connection of Backend.Open, the replica that opened the
// session, is given no registration and holds the upstream stream as a
// lone gateway does.
func WithGeneralHeld(ctx context.Context, register func(held func(bool))) context.Context {
	return context.WithValue(ctx, generalHeldKey{}, register)
}

// OnGeneralHeld returns the registration of ctx (WithGeneralHeld), or nil
// when the front gives none.
func OnGeneralHeld(ctx context.Context) func(held func(bool)) {
	register, _ := ctx.Value(generalHeldKey{}).(func(held func(bool)))
	return register
}
