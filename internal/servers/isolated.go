package servers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
)

var errClosed = errors.New("mcpgate: server is shutting down")

// ErrTooManyProcesses is matched (errors.Is) by the error Open returns when
// a session-mode server already runs maxProcesses processes. That error
// also has a RetryAfter() time.Duration method, which the HTTP front turns
// into 503 with a Retry-After header.
var ErrTooManyProcesses = errors.New("mcpgate: too many processes")

// busyRetryAfter is the Retry-After given to a session refused for the
// process cap: long enough for a session to end or a stop to finish, short
// enough that a client does not give up.
const busyRetryAfter = 5 * time.Second

// busyError is Open's error at the process cap. Its message has no
// "mcpgate:" prefix: the HTTP front adds "mcpgate: server NAME unavailable: ".
type busyError struct {
	server string
	max    int
}

func (e *busyError) Error() string {
	return fmt.Sprintf("server %q already runs %d processes (its maxProcesses); retry in %s",
		e.server, e.max, busyRetryAfter)
}

func (e *busyError) Unwrap() error { return ErrTooManyProcesses }

// RetryAfter tells the client when a process may be free.
func (e *busyError) RetryAfter() time.Duration { return busyRetryAfter }

// isolated gives every session its own upstream: a process, or a remote
// session. With Prewarm set it keeps processes started ahead of sessions
// (see pool.go).
//
// A session's process is stopped in the background when the session ends
// (stopping one takes up to 2*StopGrace), so that ending many sessions at
// once takes as long as ending one; Close waits for those stops, and for
// the processes Opens are starting.
type isolated struct {
	// A server of session mode serves stateless requests through
	// isolatedStdio, a remote through remoteServer: on its own (an "sse"
	// remote) it serves sessions only.
	conn.SessionsOnly
	// A session's process lives in this replica; a remote's upstream
	// session is portable, which remoteServer says with its own Resume (a
	// legacy "sse" remote, a plain isolated, stays bound to its event
	// stream).
	conn.OwnerBound

	// Static after construction.
	cfg *config.Server
	max int // processes at once, live + pooled + starting + stopping; 0: no cap
	// spawn starts a process; ctx is the opening request's (a remote's
	// principal: credentials.go), Background for the pool.
	spawn func(ctx context.Context) (*proc, error)
	log   *slog.Logger

	fill chan struct{}  // wakes the filler (capacity 1: wake-ups merge)
	stop chan struct{}  // closed by Close
	wg   sync.WaitGroup // the filler
	// busy counts the starts by Open and the background stops of ended
	// sessions' processes; Add only under mu while not closed, so that it
	// comes before the Wait in Close.
	busy sync.WaitGroup

	mu sync.Mutex
	// guarded by mu:
	closed  bool
	count   int                // processes counted against max
	pool    []*proc            // prewarmed, not yet given to a session; oldest first
	filling bool               // the filler holds a slot for a process it is starting
	pooled  chan struct{}      // closed and replaced when filling ends: wakes Opens waiting at the cap
	live    map[*proc]struct{} // given to sessions
}

func newIsolated(cfg *config.Server, maxProcs int, spawn func() (*proc, error), log *slog.Logger) *isolated {
	return newIsolatedFor(cfg, maxProcs, func(context.Context) (*proc, error) { return spawn() }, log)
}

// newIsolatedFor is newIsolated with a spawn that gets the context of the
// Open it starts a process for (a remote's principal: credentials.go).
func newIsolatedFor(cfg *config.Server, maxProcs int, spawn func(ctx context.Context) (*proc, error), log *slog.Logger) *isolated {
	s := &isolated{
		cfg: cfg, max: maxProcs, spawn: spawn, log: log,
		fill: make(chan struct{}, 1), stop: make(chan struct{}),
		pooled: make(chan struct{}), live: map[*proc]struct{}{},
	}
	if cfg.Prewarm > 0 {
		s.wg.Add(1)
		go s.filler()
		s.refill()
	}
	return s
}

// reserve counts one more process against the cap; it reports false at the
// cap. Called with mu held.
func (s *isolated) reserve() bool {
	if s.max > 0 && s.count >= s.max {
		return false
	}
	s.count++
	return true
}

// release uncounts one process, and wakes the filler: the slot may be what
// the pool was waiting for. It takes mu.
func (s *isolated) release() {
	s.mu.Lock()
	s.count--
	s.mu.Unlock()
	s.refill()
}

// Open gives the session a process of its own: a prewarmed one if one is
// usable, else one started now. At the cap it waits for the process the
// filler is starting, if it is starting one (bounded by ctx), and is
// refused otherwise.
func (s *isolated) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		if p := s.takePooledLocked(); p != nil {
			s.live[p] = struct{}{}
			s.mu.Unlock()
			s.refill()
			return s.conn(p, general), nil
		}
		if s.reserve() {
			s.busy.Add(1)
			s.mu.Unlock()
			s.refill() // the pool may be short for want of a wake-up (a failed start)
			return s.startFor(ctx, general, s.spawn)
		}
		if !s.filling {
			s.mu.Unlock()
			return nil, &busyError{server: s.cfg.Name, max: s.max}
		}
		wait := s.pooled
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// openWith gives the session a process started by spawn rather than by
// the server's own: the upstream of a remote session resumed from another
// replica (portable.go), which no pooled process can stand for. It is
// counted against the cap like any other.
func (s *isolated) openWith(ctx context.Context, general conn.Stream, spawn func(ctx context.Context) (*proc, error)) (conn.Conn, error) {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, errClosed
	case !s.reserve():
		s.mu.Unlock()
		return nil, &busyError{server: s.cfg.Name, max: s.max}
	}
	s.busy.Add(1)
	s.mu.Unlock()
	return s.startFor(ctx, general, spawn)
}

// startFor starts a process with spawn for one session, in a slot already
// reserved and counted in busy.
func (s *isolated) startFor(ctx context.Context, general conn.Stream, spawn func(ctx context.Context) (*proc, error)) (conn.Conn, error) {
	defer s.busy.Done()
	p, err := spawn(ctx)
	if err != nil {
		s.release()
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.stop() // Close waits for it (busy)
		s.release()
		return nil, errClosed
	}
	s.live[p] = struct{}{}
	s.mu.Unlock()
	return s.conn(p, general), nil
}

func (s *isolated) conn(p *proc, general conn.Stream) *isolatedConn {
	c := p.m.Join(general)
	if p.resumed != "" {
		c.Resumed(p.resumed)
	}
	return &isolatedConn{Client: c, s: s, p: p}
}

func (s *isolated) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p := range s.live {
		n += p.m.Pending()
	}
	return n
}

// Close stops every process, pooled, live and already stopping, all in
// parallel, and returns when they are all gone, with those that Opens and
// the filler were starting.
func (s *isolated) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		s.busy.Wait()
		return
	}
	s.closed = true
	procs := append([]*proc(nil), s.pool...)
	for p := range s.live {
		procs = append(procs, p)
	}
	s.pool, s.live = nil, map[*proc]struct{}{}
	// Under mu, so that a second Close's Wait comes after these Adds.
	for _, p := range procs {
		s.stopLater(p)
	}
	s.wakeWaitersLocked()
	s.mu.Unlock()
	close(s.stop)
	// The filler may be starting a process: it stops it itself on seeing
	// closed, and nothing waits on a pipe while it does.
	s.wg.Wait()
	s.busy.Wait()
}

// stopLater stops p in the background, uncounting it when it is gone.
// Close waits for it. Called with mu held (release takes mu only in the
// goroutine).
func (s *isolated) stopLater(p *proc) {
	s.busy.Go(func() {
		p.stop()
		s.release()
	})
}

// isolatedConn is a session's client on its own process; closing it stops
// the process (in the background: see isolated).
type isolatedConn struct {
	*mux.Client
	s    *isolated
	p    *proc
	once sync.Once
}

// Close is CloseWith("").
func (c *isolatedConn) Close() { c.CloseWith("") }

// deliveryWait bounds how long Handle waits for a portable session's
// notification to reach its server.
const deliveryWait = 10 * time.Second

// Handle routes msg; a notification of a portable session (one another
// replica may serve next) returns only once the server took it, or
// deliveryWait passed, or ctx ended: the client's next request, through
// whichever replica, then cannot reach the server before it (a server
// refuses requests that come before notifications/initialized).
func (c *isolatedConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	c.Client.Handle(ctx, msg, out)
	if c.p.delivered == nil || msg.Kind != jsonrpc.KindNotification {
		return
	}
	t := time.NewTimer(deliveryWait)
	defer t.Stop()
	select {
	case <-c.p.delivered():
	case <-ctx.Done():
	case <-t.C:
	}
}

// CloseWith ends the client with reason, then gives back its process.
func (c *isolatedConn) CloseWith(reason string) {
	c.once.Do(func() {
		if reason == conn.ReasonDeleted && c.p.endUpstream != nil {
			c.p.endUpstream() // the client ended it: not left to other replicas
		}
		c.Client.CloseWith(reason)
		c.s.mu.Lock()
		_, mine := c.s.live[c.p]
		delete(c.s.live, c.p)
		if mine {
			// Added under mu while not closed, so never concurrently
			// with the Wait in Close (which runs after closed is set).
			c.s.stopLater(c.p)
		}
		c.s.mu.Unlock()
	})
}
