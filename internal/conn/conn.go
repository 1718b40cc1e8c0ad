// Package conn is the one contract between the HTTP front and everything
// that serves a client session: a Backend opens a Conn for each client
// session (or each request of the stateless revision), and the Conn
// answers each of the session's requests exactly once on the Stream the
// request came with. There are no optional interfaces: every Conn has
// CloseWith, every Backend says whether it serves stateless requests, and
// a stateless connection is a StatelessConn value, so nobody type-asserts
// a Conn or a Backend.
//
// It also holds what every connection kind shares: Calls, the
// exactly-once table of a connection's requests in flight (calls.go), and
// Middleware, a concern wrapped around a Conn (func(Conn) Conn), applied
// to all of a Backend's connections by Wrap (middleware.go); plus the
// request context's principal and headers (context.go), the Policy a
// target's requests are judged by (policy.go), the strict reader of the
// params a policy checks (params.go), the handoff of a portable
// session's connection to another replica (handoff.go), and which replica
// carries a portable session's server-to-client stream (general.go).
//
// The front (internal/front) calls these interfaces; internal/mux,
// internal/servers, internal/eras and internal/aggregate implement them.
// The package imports only internal/jsonrpc and internal/auth, so nothing
// below the front imports the front. Locking: see Calls; the rest holds
// no state.
package conn

import (
	"context"
	"errors"

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

// Conn is a client session's connection to its server: one session of the
// session eras, or one request of the stateless revision. Every method is
// safe for concurrent use.
type Conn interface {
	// Handle routes one message; a request is answered exactly once on out.
	Handle(ctx context.Context, msg *jsonrpc.Message, out Stream)
	// Version is the protocol version negotiated by initialize ("" before).
	Version() string
	// Abandon cancels the requests whose replies were to go to out: their
	// client disconnected and cannot resume.
	Abandon(out Stream)
	// CloseWith ends the session's use of the server, telling the requests
	// still in flight why, in words a client can read ("the session
	// expired", "the client deleted the session", "the gateway is shutting
	// down"): they are answered "mcpgate: " + reason. An empty reason is
	// Close's plain "session closed".
	//
	// CloseWith must answer every request of the session still in flight
	// with a JSON-RPC error on its Stream before it returns, and must not
	// block on the server: the HTTP front closes the session's streams
	// right after. Only the first CloseWith or Close does anything.
	CloseWith(reason string)
	// Close is CloseWith(""): each ends the session on its own.
	//
	// Both are required rather than one Close(reason): Close is what every
	// owner without a reason calls (pools, shutdown paths, tests), and
	// CloseWith is what the front and the endpoints call when they know
	// why; neither may leave work to the other.
	Close()
}

// Backend opens client sessions, and connections for requests of the
// stateless revision, on one configured server or endpoint.
type Backend interface {
	// Open starts a session's connection; messages not tied to a request go
	// to general. An error with a RetryAfter() time.Duration method (the
	// server is starting, or at its session limit) is answered 503 with a
	// Retry-After header.
	Open(ctx context.Context, general Stream) (Conn, error)
	// ServesStateless reports whether OpenStateless can succeed: false for
	// a server of the session eras only (a remote of the legacy
	// transport), whose stateless requests the front refuses itself
	// before opening anything. It never changes.
	ServesStateless() bool
	// OpenStateless opens the connection of one request of protocol
	// version version, from a client declaring capabilities caps (raw JSON
	// object); messages not tied to it go to general. It fails like Open,
	// and with ErrSessionsOnly at once where ServesStateless is false.
	OpenStateless(ctx context.Context, general Stream, version string, caps []byte) (StatelessConn, error)
	// Resume returns the connection of a session another replica opened,
	// from the last state that replica's handoff sink received (see
	// handoff.go); messages not tied to a request go to general. Nothing
	// is sent upstream to initialize: the client did that already. It
	// fails with ErrNotPortable where the sessions are owner-bound, and
	// with an error naming the server or endpoint for a state that does
	// not parse.
	Resume(ctx context.Context, general Stream, state []byte) (Conn, error)
}

// ErrSessionsOnly is OpenStateless's error on a Backend that serves
// sessions only.
var ErrSessionsOnly = errors.New("mcpgate: the server serves sessions only")

// SessionsOnly is the stateless half of a Backend that serves sessions
// only: embed it.
type SessionsOnly struct{}

// ServesStateless is false.
func (SessionsOnly) ServesStateless() bool { return false }

// OpenStateless fails with ErrSessionsOnly.
func (SessionsOnly) OpenStateless(context.Context, Stream, string, []byte) (StatelessConn, error) {
	return StatelessConn{}, ErrSessionsOnly
}

// StatelessConn is the connection of one stateless request: a Conn, and
// what the front needs to know of the server behind it. It is a value, not
// an interface, so that middleware wraps its Conn (WithConn) and keeps the
// rest; make one with NewStatelessConn.
type StatelessConn struct {
	Conn
	serverInit  func(ctx context.Context) ([]byte, error)
	passthrough bool
}

// NewStatelessConn returns the StatelessConn of c. serverInit returns the
// server's initialize result once it is ready (server/discover is built
// from it); passthrough reports that the server speaks the stateless
// revision itself: requests go to it as they came, with everything the
// revision has (discover, listen, input_required) answered by it.
func NewStatelessConn(c Conn, serverInit func(ctx context.Context) ([]byte, error), passthrough bool) StatelessConn {
	return StatelessConn{Conn: c, serverInit: serverInit, passthrough: passthrough}
}

// ServerInit returns the server's initialize result once it is ready. The
// caller must not modify it.
func (s StatelessConn) ServerInit(ctx context.Context) ([]byte, error) { return s.serverInit(ctx) }

// Passthrough reports that the server speaks the stateless revision
// itself.
func (s StatelessConn) Passthrough() bool { return s.passthrough }

// WithConn returns s with its Conn replaced by c (one wrapping it).
func (s StatelessConn) WithConn(c Conn) StatelessConn {
	s.Conn = c
	return s
}
