package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/httpapi"
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
// session.
//
// A session's process is stopped in the background when the session ends
// (stopping one takes up to 2*StopGrace), so that ending many sessions at
// once takes as long as ending one; Close waits for those stops.
type isolated struct {
	// Static after construction.
	cfg   *config.Server
	max   int // processes at once, live + pooled + starting + stopping; 0: no cap
	spawn func() (*proc, error)
	log   *slog.Logger

	fill  chan struct{} // wakes the pool filler
	stop  chan struct{} // closed by Close
	wg    sync.WaitGroup
	stops sync.WaitGroup // background stops of ended sessions' processes

	mu sync.Mutex
	// guarded by mu:
	closed bool
	count  int                // processes counted against max
	pool   []*proc            // prewarmed, not yet given to a session
	live   map[*proc]struct{} // given to sessions
}

func newIsolated(cfg *config.Server, maxProcs int, spawn func() (*proc, error), log *slog.Logger) *isolated {
	s := &isolated{
		cfg: cfg, max: maxProcs, spawn: spawn, log: log,
		fill: make(chan struct{}, 1), stop: make(chan struct{}), live: map[*proc]struct{}{},
	}
	if cfg.Prewarm > 0 {
		s.wg.Add(1)
		go s.filler()
		s.fill <- struct{}{}
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

// release uncounts one process. It takes mu.
func (s *isolated) release() {
	s.mu.Lock()
	s.count--
	s.mu.Unlock()
}

// filler keeps Prewarm processes started and waiting, within the cap.
func (s *isolated) filler() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.fill:
		}
		for {
			s.mu.Lock()
			need := !s.closed && len(s.pool) < s.cfg.Prewarm && s.reserve()
			s.mu.Unlock()
			if !need {
				break
			}
			p, err := s.spawn()
			if err != nil {
				s.release()
				s.log.Error("prewarming a process failed", "server", s.cfg.Name, "err", err)
				break
			}
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				p.stop()
				s.release()
				return
			}
			s.pool = append(s.pool, p)
			s.mu.Unlock()
		}
	}
}

func (s *isolated) Open(_ context.Context, general mux.Stream) (httpapi.Conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	var p *proc
	if n := len(s.pool); n > 0 {
		p, s.pool = s.pool[n-1], s.pool[:n-1]
	} else if !s.reserve() {
		s.mu.Unlock()
		return nil, &busyError{server: s.cfg.Name, max: s.max}
	}
	s.mu.Unlock()
	if s.cfg.Prewarm > 0 {
		select {
		case s.fill <- struct{}{}:
		default:
		}
	}
	if p == nil {
		var err error
		if p, err = s.spawn(); err != nil {
			s.release()
			return nil, err
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.stop()
		s.release()
		return nil, errClosed
	}
	s.live[p] = struct{}{}
	s.mu.Unlock()
	return &isolatedConn{Client: p.m.Join(general), s: s, p: p}, nil
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
// parallel, and returns when they are all gone.
func (s *isolated) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.stops.Wait()
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
	s.mu.Unlock()
	close(s.stop)
	// The filler may be starting a process: it stops it itself on seeing
	// closed, and nothing waits on a pipe while it does.
	s.wg.Wait()
	s.stops.Wait()
}

// stopLater stops p in the background, uncounting it when it is gone.
// Close waits for it. Called with mu held (release takes mu only in the
// goroutine).
func (s *isolated) stopLater(p *proc) {
	s.stops.Go(func() {
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

func (c *isolatedConn) Close() {
	c.once.Do(func() {
		c.Client.Close()
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
