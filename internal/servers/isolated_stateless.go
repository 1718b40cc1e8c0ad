package servers

import (
	"context"
	"log/slog"
	"sync"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/mux"
)

// isolatedStdio is a stdio server with isolation "session". A session of
// the session eras gets a process of its own (the embedded isolated). A
// request of the stateless revision (2026-07-28) has no session to give a
// process to, and the revision says a stdio connection is not a session
// either (a client may interleave unrelated requests on one process), so
// stateless requests go to processes of their own, apart from the
// sessions', served exactly as a shared server serves its stateless
// requests: by a shared server (shared.go) of the same command, whose
// Open is never called. Its "protocol" key works as in shared mode: with
// "auto" a process probed with server/discover gets the requests natively
// when it speaks 2026-07-28, else they are translated for initialized
// processes; "sessions" (or its old name "legacy") translates only; "2026-07-28" requires the revision.
// (The shared server's sessions' process, which newShared starts for any
// protocol but "2026-07-28", then serves nothing here: a cost of reusing
// shared as it is.)
//
// The shared server starts on the first stateless request ("auto",
// "sessions"): a session-isolated server whose clients all initialize
// sessions runs no process for a stateless client that never comes. With
// "2026-07-28" it starts with the Server, as a shared server's second
// process does.
//
// Its processes (shared.go's and translate.go's) are not counted against
// maxProcesses. That cap bounds what sessions can make the gateway start,
// one process each; the stateless processes are bounded by shared.go
// whatever the number of stateless clients, as in shared mode, and mostly
// run as long as the Server. Counted, they would take slots that sessions
// never get back, and a pool prewarmed up to the cap would refuse
// stateless requests for good.
type isolatedStdio struct {
	*isolated

	// Static after construction.
	opts mux.Options // shared mode's: not Exclusive
	// starts counts the running starts of the shared server; Add only
	// under mu while not closed, so that it comes before the Wait in
	// Close.
	starts sync.WaitGroup

	mu sync.Mutex
	// guarded by mu:
	closed   bool
	st       *shared    // the stateless requests' server; nil before it starts
	starting *startCall // the running start; nil when none runs
}

// startCall is one start of the shared server, shared by the stateless
// requests that arrive while it runs.
type startCall struct {
	done chan struct{} // closed when the start ended
	err  error         // why it failed; written before done is closed
}

// newIsolatedStdio wraps iso, the isolated server of stdio server cfg,
// with the stateless path; opts are the multiplexer options of a shared
// server. It takes iso over: it closes it on error.
func newIsolatedStdio(cfg *config.Server, iso *isolated, opts mux.Options, log *slog.Logger) (*isolatedStdio, error) {
	s := &isolatedStdio{isolated: iso, opts: opts}
	if cfg.Protocol == config.ProtocolModern {
		st, err := newShared(cfg, opts, log)
		if err != nil {
			iso.Close()
			return nil, err
		}
		s.st = st
	}
	return s, nil
}

// Open opens a session: a process of its own, or, pinned to 2026-07-28
// (a server that may not take initialize at all), a session of the reverse
// bridge on the stateless requests' server, which has no session to
// isolate.
func (s *isolatedStdio) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	if s.cfg.Protocol != config.ProtocolModern {
		return s.isolated.Open(ctx, general)
	}
	st, err := s.statelessServer(ctx)
	if err != nil {
		return nil, err
	}
	return st.Open(ctx, general)
}

// OpenStateless opens the connection of one request of the stateless
// revision on the shared server, starting it on first use (the requests
// arriving meanwhile wait for that one start, bounded by ctx). It then
// waits as shared's does.
func (s *isolatedStdio) OpenStateless(ctx context.Context, general conn.Stream, version string, caps []byte) (conn.StatelessConn, error) {
	st, err := s.statelessServer(ctx)
	if err != nil {
		return conn.StatelessConn{}, err
	}
	return st.OpenStateless(ctx, general, version, caps)
}

// ServesStateless is true: on the shared server of isolatedStdio.
func (s *isolatedStdio) ServesStateless() bool { return true }

// statelessServer returns the shared server, starting it if none runs.
func (s *isolatedStdio) statelessServer(ctx context.Context) (*shared, error) {
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, errClosed
		case s.st != nil:
			st := s.st
			s.mu.Unlock()
			return st, nil
		case s.starting == nil:
			call := &startCall{done: make(chan struct{})}
			s.starting = call
			s.starts.Add(1)
			s.mu.Unlock()
			return s.start(call)
		}
		call := s.starting
		s.mu.Unlock()
		select {
		case <-call.done:
			if call.err != nil {
				return nil, call.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// start starts the shared server, outside mu: the requests waiting for it
// give up when their clients leave, and Close marks the server closed at
// once (it then waits for the start, which stops what it started). A
// failed start is not kept:
// the next request tries again (newShared fails only for a config that
// cannot run at all; a command that cannot be spawned is retried by its
// supervisor, and the requests get an error naming the cause).
func (s *isolatedStdio) start(call *startCall) (*shared, error) {
	defer s.starts.Done()
	st, err := newShared(s.cfg, s.opts, s.log)
	s.mu.Lock()
	s.starting = nil
	switch {
	case err != nil:
	case s.closed:
		// Close came meanwhile and did not see st: stopped here, and
		// Close waits for it (starts).
		err = errClosed
	default:
		s.st = st
	}
	call.err = err
	s.mu.Unlock()
	close(call.done)
	if err != nil {
		if st != nil {
			st.Close()
		}
		return nil, err
	}
	s.log.Info("stateless requests of a session-isolated server go to processes of their own", "server", s.cfg.Name)
	return st, nil
}

// Pending counts the requests in flight of the sessions' processes and of
// the stateless ones.
func (s *isolatedStdio) Pending() int {
	n := s.isolated.Pending()
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	if st != nil {
		n += st.Pending()
	}
	return n
}

// Close stops the sessions' processes and the stateless ones in parallel,
// and returns when they are all gone, with the one a start was starting.
func (s *isolatedStdio) Close() {
	s.mu.Lock()
	s.closed = true
	st := s.st
	s.st = nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	if st != nil {
		wg.Go(st.Close)
	}
	s.isolated.Close()
	wg.Wait()
	s.starts.Wait()
}

// Interface guards.
var _ Server = (*isolatedStdio)(nil)
