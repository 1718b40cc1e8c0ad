package backend

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/httpapi"
	"github.com/mcpgate/mcpgate/internal/mux"
)

var errClosed = errors.New("mcpgate: server is shutting down")

// isolated gives every session its own upstream: a process, or a remote
// session.
type isolated struct {
	cfg   *config.Server
	spawn func() (*proc, error)
	log   *slog.Logger

	fill chan struct{} // wakes the pool filler
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu sync.Mutex
	// guarded by mu:
	closed bool
	pool   []*proc            // prewarmed, not yet given to a session
	live   map[*proc]struct{} // given to sessions
}

func newIsolated(cfg *config.Server, spawn func() (*proc, error), log *slog.Logger) *isolated {
	s := &isolated{
		cfg: cfg, spawn: spawn, log: log,
		fill: make(chan struct{}, 1), stop: make(chan struct{}), live: map[*proc]struct{}{},
	}
	if cfg.Prewarm > 0 {
		s.wg.Add(1)
		go s.filler()
		s.fill <- struct{}{}
	}
	return s
}

// filler keeps Prewarm processes started and waiting.
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
			need := !s.closed && len(s.pool) < s.cfg.Prewarm
			s.mu.Unlock()
			if !need {
				break
			}
			p, err := s.spawn()
			if err != nil {
				s.log.Error("prewarming a process failed", "server", s.cfg.Name, "err", err)
				break
			}
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				p.stop()
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
			return nil, err
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.stop()
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

func (s *isolated) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	procs := append([]*proc(nil), s.pool...)
	for p := range s.live {
		procs = append(procs, p)
	}
	s.pool, s.live = nil, map[*proc]struct{}{}
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.stop)
	}
	wg.Wait()
}

// isolatedConn is a session's client on its own process; closing it stops
// the process.
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
		c.s.mu.Unlock()
		if mine {
			c.p.stop()
		}
	})
}
