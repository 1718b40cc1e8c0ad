package upstream

import (
	"context"
	"time"
)

// Upstream is the connection to one MCP server as a multiplexer writes to
// it. Its generations are numbered 1, 2, ... in the order the Handler's
// Started reports them; 0 is never a generation. Every method is safe for
// concurrent use and none retains msg.
type Upstream interface {
	// Send writes one message to whichever generation runs. It may block
	// while the upstream's queue is full, until ctx ends; a nil error
	// means queued, not delivered: a message still queued when its
	// generation ends is dropped (Exited already tells the owner).
	Send(ctx context.Context, msg []byte) error
	// TrySend is Send that never blocks: it fails at once when the queue
	// is full or nothing runs. Readers, timers and teardown paths use it
	// for best-effort messages, which must not wait on a server.
	TrySend(msg []byte) error
	// SendGen is Send restricted to generation gen: it fails, without
	// writing, unless gen is the generation running now.
	SendGen(ctx context.Context, gen uint64, msg []byte) error
	// TrySendGen is TrySend restricted to generation gen. Never blocks.
	TrySendGen(gen uint64, msg []byte) error
	// Restart ends generation gen now if it is the running one, so that
	// a fresh one replaces it (a server that failed to initialize or
	// stopped answering); reason is reported in its exit. A no-op for
	// any other generation, and for an upstream that cannot restart
	// (CanRestart false). Never blocks.
	Restart(gen uint64, reason string)
	// CanRestart reports whether Restart ends a generation (for a
	// supervisor to replace). It is constant for the life of the
	// upstream. When false, the owner that wants another try of a failed
	// generation makes it on the same one.
	CanRestart() bool
	// Served records that generation gen answered a client request: a
	// supervisor restarting a crashing server may start its backoff
	// over. Never blocks.
	Served(gen uint64)
	// PID returns the operating-system process id of the running
	// generation, 0 if none or if the upstream is not a local process.
	PID() int
}

// Handler receives what an Upstream reads from its server. Its methods
// are called one at a time, never concurrently, in the order Started,
// Line or Oversized..., Exited for each generation, generations in order.
// A method may call the Upstream's send methods (TrySend rather than Send:
// while it runs, the server's output is not read) but must not call its
// Close, which waits for the goroutine calling the method; it should
// return quickly.
type Handler interface {
	// Started is called when generation gen began, before any of its
	// messages is delivered. Sends reach gen from then on.
	Started(gen uint64)
	// Line is called for each message from the server, without framing.
	// msg is valid only during the call.
	Line(gen uint64, msg []byte)
	// Oversized is called instead of Line for a message over the
	// upstream's size limit: prefix is its beginning (valid during the
	// call), size its length as far as it was read. The rest is dropped.
	Oversized(gen uint64, prefix []byte, size int)
	// Exited is called once per generation when it is gone: err is nil
	// after a stop asked for by the upstream's Close, else why it ended.
	// Sends no longer reach gen by then.
	Exited(gen uint64, err error)
}

// Supervised is the Handler of an upstream that restarts its server
// itself (a stdio process): it also hears when a restart is delayed.
type Supervised interface {
	Handler
	// Waiting is called before the supervisor sleeps d ahead of the next
	// start, with err, why: the exit Exited reported, or a start that
	// could not run the command at all.
	Waiting(err error, d time.Duration)
}
