// Package conn is the contract between the HTTP front and everything that
// serves a client session: a Backend opens a Conn for each client session
// (or each request of the stateless revision), and the Conn answers each
// of the session's requests exactly once on the Stream the request came
// with.
//
// The front (internal/front) calls these interfaces; internal/mux,
// internal/servers, internal/eras and internal/aggregate implement them.
// The package imports only internal/jsonrpc, so nothing below the front
// imports the front.
package conn

import (
	"context"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Stream receives the messages routed to one client stream: the stream of
// the client request that caused them, or the session's standalone stream.
// Methods must not block; they take ownership of msg, which the mux never
// modifies afterwards (the same slice may be given to several streams).
type Stream interface {
	// Send delivers a message that is not the final reply to a request.
	Send(msg []byte)
	// Reply delivers the final reply to a request. A nil msg ends the request
	// without a message: the client cancelled it.
	Reply(msg []byte)
}

// Conn is a client session's connection to its server.
type Conn interface {
	// Handle routes one message; a request is answered exactly once on out.
	Handle(ctx context.Context, msg *jsonrpc.Message, out Stream)
	// Version is the protocol version negotiated by initialize ("" before).
	Version() string
	// Abandon cancels the requests whose replies were to go to out: their
	// client disconnected and cannot resume.
	Abandon(out Stream)
	// Close ends the session's use of the server.
	//
	// Close must answer every request of the session still in flight with a
	// JSON-RPC error on its Stream before it returns, and must not block on
	// the server: the HTTP front closes the session's streams right after.
	Close()
}

// ConnCloseWith is an optional interface of a Conn: when the handler ends a
// session it calls CloseWith first, with why in words a client can read
// ("the session expired", "the client deleted the session", "the gateway
// is shutting down"), so that the requests in flight are told that
// ("mcpgate: " + reason) rather than a bare "session closed"; Close is
// called right after, as for every Conn.
type ConnCloseWith interface {
	CloseWith(reason string)
}

// Backend opens client sessions on one configured server.
type Backend interface {
	// Open starts a session's connection; messages not tied to a request go
	// to general. An error with a RetryAfter() time.Duration method (the
	// server is starting, or at its session limit) is answered 503 with a
	// Retry-After header.
	Open(ctx context.Context, general Stream) (Conn, error)
}

// StatelessBackend is an optional interface of a Backend that serves
// requests of the stateless revision.
type StatelessBackend interface {
	// OpenStateless opens the connection of one request of protocol
	// version version, from a client declaring capabilities caps (raw JSON
	// object); messages not tied to it go to general. It fails like Open.
	OpenStateless(ctx context.Context, general Stream, version string, caps []byte) (StatelessConn, error)
}

// StatelessConn is the connection of one stateless request.
type StatelessConn interface {
	Conn
	// ServerInit returns the server's initialize result once it is ready
	// (server/discover is built from it). The caller must not modify it.
	ServerInit(ctx context.Context) ([]byte, error)
	// Passthrough reports that the server speaks the stateless revision
	// itself: requests go to it as they came, with everything the
	// revision has (discover, listen, input_required) answered by it.
	Passthrough() bool
}
