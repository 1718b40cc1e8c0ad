package servers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// shared serves every session from one process, initialized by its
// multiplexer. Requests of the stateless revision (2026-07-28) go, when
// the server speaks that revision itself, to a second process of the same
// command behind a Modern multiplexer, which never initializes it but
// probes it with server/discover: only a process that never saw initialize
// answers them natively (a Go SDK server that did would ask its client with
// server requests where a stateless client needs input_required results,
// and input_required results are what the gateway must pass through
// untouched). Otherwise they are translated (front does that) for
// translation processes: initialized like the first, but with the client
// capabilities the request declared, and none taking new requests while
// one of its requests waits for a client's input (translate.go).
//
// Config "protocol": "sessions" (or "legacy") never starts the second process; "auto"
// starts it on the first stateless request and, unless a probe of it
// succeeds first, falls back to translation for this Server's lifetime when
// its probe finds no 2026-07-28 server or it exits or cannot be spawned;
// once it has served, a request arriving while it is down (restarting) is
// translated, and the next ones go to it again once it is probed.
// "2026-07-28" starts it with the Server and never falls back: stateless
// requests get an error naming why while it is not ready.
//
// The second process and the translation processes are supervised like the
// first (restarted after a crash, the second probed again), counted in
// Pending, and stopped by Close.
type shared struct {
	// Its sessions live in this replica's process (reverse-bridge ones
	// too: their parked requests and listen streams are here).
	conn.OwnerBound

	// Static after construction.
	p        *proc        // the sessions' process (the pool's first); nil when pinned to 2026-07-28
	pool     *sessionPool // the sessions' processes (config "processes"), p first; nil with one
	size     int          // config "processes": the pool's size, and the stateless requests' processes
	name     string       // server name
	protocol string       // config.Protocol*, ProtocolLegacy read as ProtocolSessions; "" counts as auto
	spawn    func() (*proc, error)
	timeout  time.Duration // a request's (config "timeout"): a reverse session's, input rounds included
	trans    *translation  // the translated stateless requests' processes
	log      *slog.Logger

	// stops are the background stops of second processes found to speak
	// only the session eras;
	// Add only under mu while not closed, so that it comes before the
	// Wait in Close.
	stops sync.WaitGroup

	mu sync.Mutex
	// guarded by mu:
	closed       bool
	modern       []*proc // the stateless requests' processes (size of them); nil before they start and after a fallback
	sessionsOnly error   // auto: why stateless requests are translated; once set, for good
	probed       bool    // a probe of modern succeeded once
	// reverse: p refused initialize and the server speaks 2026-07-28
	// alone (auto); p is stopped and sessions take the reverse bridge.
	reverse bool
}

func newShared(cfg *config.Server, opts mux.Options, log *slog.Logger) (*shared, error) {
	// A server pinned to 2026-07-28 has no sessions' process: its
	// sessions of the older eras are served by the reverse bridge.
	size := max(cfg.Processes, 1) // a literal Server's 0 is 1
	var p *proc
	var pool *sessionPool
	if cfg.Protocol != config.ProtocolModern {
		procs, err := startN(size, func(i int) (*proc, error) {
			o := opts
			if size > 1 {
				o.Logger = log.With("process", i)
			}
			return start(cfg, o, sharedPipeBytes, o.Logger)
		})
		if err != nil {
			return nil, err
		}
		p = procs[0]
		if size > 1 {
			pool = &sessionPool{}
			for _, q := range procs {
				pool.procs = append(pool.procs, &poolProc{p: q})
			}
		}
	}
	modernOpts := opts
	modernOpts.Modern = true
	modernLog := log.With("era", protocol.StatelessVersion)
	modernOpts.Logger = modernLog
	proto := cfg.Protocol
	if cfg.SessionsOnly() {
		proto = config.ProtocolSessions
	}
	s := &shared{
		p: p, pool: pool, size: size, name: cfg.Name, protocol: proto, timeout: cfg.Timeout, log: log,
		spawn: func() (*proc, error) { return start(cfg, modernOpts, sharedPipeBytes, modernLog) },
		trans: newTranslation(cfg, opts, log),
	}
	s.trans.base = size
	if s.protocol == config.ProtocolModern {
		if _, err := s.modernProc(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Open opens a session of the older eras: a client of the sessions'
// process, or of the reverse bridge when the server is pinned to
// 2026-07-28 (each of the session's requests a stateless one).
//
// With "protocol": "auto", a server whose sessions' process refuses
// initialize (an error answer, not a crash) while its second process
// answers server/discover as a 2026-07-28 server speaks that revision
// alone: its sessions take the reverse bridge too. (A session opened
// while the first initialize is still unanswered joins the process, and
// gets the refusal.)
func (s *shared) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	if s.p == nil || s.isReverse() || s.modernOnly(ctx) {
		return eras.NewReverse(func(ctx context.Context, general conn.Stream) (conn.StatelessConn, error) {
			return s.OpenStateless(ctx, general, protocol.StatelessVersion, nil)
		}, general, s.timeout, s.log.With("bridge", "reverse")), nil
	}
	if s.pool != nil {
		return &pinnedConn{pool: s.pool, general: general}, nil
	}
	return s.p.m.Join(general), nil
}

// startN starts n processes with start(i), in order; on an error it stops
// those it started.
func startN(n int, start func(i int) (*proc, error)) ([]*proc, error) {
	procs := make([]*proc, 0, n)
	for i := range n {
		p, err := start(i)
		if err != nil {
			var wg sync.WaitGroup
			for _, q := range procs {
				wg.Go(q.stop)
			}
			wg.Wait()
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// sessionsProcs returns the processes that serve the sessions (p, or the
// pool's), nil when p is nil.
func (s *shared) sessionsProcs() []*proc {
	if s.pool == nil {
		if s.p == nil {
			return nil
		}
		return []*proc{s.p}
	}
	procs := make([]*proc, len(s.pool.procs))
	for i, pp := range s.pool.procs {
		procs[i] = pp.p
	}
	return procs
}

// modernOnly reports, for "auto", that the sessions' process refused
// initialize and the server speaks 2026-07-28 (probing it if not yet).
func (s *shared) modernOnly(ctx context.Context) bool {
	if s.protocol == config.ProtocolSessions {
		return false
	}
	if s.p.m.InitRefused() == nil {
		return false
	}
	// As a stateless request would: the probe, and the fallback when it
	// finds no 2026-07-28 server, are OpenStateless's.
	c, err := s.OpenStateless(ctx, discard{}, protocol.StatelessVersion, nil)
	if err != nil {
		return false
	}
	defer c.Close()
	if !c.Passthrough() {
		return false
	}
	// For good: the sessions' process is stopped rather than restarted
	// and refused again forever.
	s.mu.Lock()
	if s.closed || s.reverse {
		s.mu.Unlock()
		return true
	}
	s.reverse = true
	s.stops.Add(1)
	s.mu.Unlock()
	s.log.Info("the server refuses initialize and speaks "+protocol.StatelessVersion+": its sessions of the older eras take the reverse bridge", "server", s.name)
	go func() {
		defer s.stops.Done()
		stopAll(s.sessionsProcs())
	}()
	return true
}

// isReverse reports that modernOnly found the server speaks 2026-07-28
// alone.
func (s *shared) isReverse() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reverse
}

// discard is a stream nothing is sent to.
type discard struct{}

func (discard) Send([]byte)  {}
func (discard) Reply([]byte) {}

// OpenStateless opens the connection of one request of the stateless
// revision: a client of the second process when the server speaks the
// revision (its Passthrough reports true), else a connection that takes a
// translation process on first use (translate.go). It waits for the second
// process's probe (bounded by ctx, the probe's timeout and the
// multiplexer's start wait).
func (s *shared) OpenStateless(ctx context.Context, general conn.Stream, version string, caps []byte) (conn.StatelessConn, error) {
	return toStateless(s.openStateless(ctx, general, version, caps))
}

// ServesStateless is true: a shared server serves stateless requests,
// itself or translated.
func (s *shared) ServesStateless() bool { return true }

func (s *shared) openStateless(ctx context.Context, general conn.Stream, version string, caps []byte) (statelessConn, error) {
	p, err := s.modernProc()
	if err != nil {
		return nil, err
	}
	if p != nil {
		c, err := s.openModern(ctx, p, general, version, caps)
		if c != nil || err != nil {
			return c, err
		}
	}
	return s.trans.open(general, version, caps, credential{})
}

// modernProc returns the process for a stateless request: of the
// processes for them (config "processes" of them, all started on first
// use), the one with the fewest requests in flight, an up one first; nil
// when stateless requests are translated.
func (s *shared) modernProc() (*proc, error) {
	if s.protocol == config.ProtocolSessions {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, errClosed
	case s.sessionsOnly != nil:
		return nil, nil
	case s.modern != nil:
		return fewestInFlight(s.modern), nil
	}
	// Spawning under mu: concurrent first requests wait for these
	// processes rather than each starting some. A command that cannot be
	// run does not fail here (it is retried with backoff; see start).
	procs, err := startN(s.size, func(int) (*proc, error) { return s.spawn() })
	if err != nil {
		if s.protocol == config.ProtocolModern {
			return nil, err
		}
		s.sessionsOnly = err
		s.log.Warn("no process for stateless requests; they are translated", "server", s.name, "err", err)
		return nil, nil
	}
	s.modern = procs
	return fewestInFlight(procs), nil
}

// fewestInFlight returns the process of procs with the fewest requests in
// flight, an up one before one that is down.
func fewestInFlight(procs []*proc) *proc {
	var best *proc
	var bestDown bool
	var bestN int
	for _, p := range procs {
		down, n := !p.usable(), p.m.Pending()
		if best == nil || (bestDown && !down) || (down == bestDown && n < bestN) {
			best, bestDown, bestN = p, down, n
		}
	}
	return best
}

// stopAll stops procs in parallel and waits for them.
func stopAll(procs []*proc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.stop)
	}
	wg.Wait()
}

// openModern joins the stateless request to p once p's probe found a
// 2026-07-28 server. It returns nil and no error when the request is to be
// translated instead (auto only), after falling back for good when p is
// not such a server or never became one.
func (s *shared) openModern(ctx context.Context, p *proc, general conn.Stream, version string, caps []byte) (statelessConn, error) {
	_, err := p.m.Discovered(ctx)
	if err == nil {
		s.mu.Lock()
		first := !s.probed
		s.probed = true
		s.mu.Unlock()
		if first {
			s.log.Info("server speaks "+protocol.StatelessVersion+"; its stateless requests go to a process of their own", "server", s.name)
		}
		c := p.m.Join(general)
		c.Stateless(version, caps)
		return c, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if s.protocol == config.ProtocolModern {
		if errors.Is(err, mux.ErrNotModern) {
			err = fmt.Errorf(`%w (the server's "protocol" is %q)`, err, config.ProtocolModern)
		}
		return nil, err
	}
	s.mu.Lock()
	probed := s.probed
	s.mu.Unlock()
	switch {
	case probed && errors.Is(err, mux.ErrNotModern) && !mux.ProbeRetries(err):
		// It served before, and its restart says it no longer speaks
		// the revision (a new version of the server): that is final.
		s.fallBack(p, err)
	case probed:
		// It served before and is down for now (a crash, a slow
		// restart): it is restarted and probed again; this request is
		// translated.
	case errors.Is(err, mux.ErrNotModern):
		s.fallBack(p, err)
	default:
		// It exited, could not be spawned or closed before it ever
		// answered: perhaps the server cannot run twice (a lock file, a
		// fixed port). The sessions' process serves.
		s.fallBack(p, fmt.Errorf("the process for stateless requests never became ready: %w", err))
	}
	return nil, nil
}

// fallBack makes stateless requests be translated for the rest of the
// Server's life, and stops the processes for them (p among them) in the
// background.
func (s *shared) fallBack(p *proc, why error) {
	s.mu.Lock()
	if s.closed || !slices.Contains(s.modern, p) {
		s.mu.Unlock()
		return // closing, or another request fell back already
	}
	procs := s.modern
	s.modern, s.sessionsOnly = nil, why
	s.stops.Add(1)
	s.mu.Unlock()
	s.log.Info("stateless requests are translated for a server of the session eras", "server", s.name, "reason", why)
	go func() {
		defer s.stops.Done()
		stopAll(procs)
	}()
}

// Close stops every process, in parallel, and waits for them and for
// stops begun by a fallback. The second process's probe (or a request
// waiting for it) ends at once.
func (s *shared) Close() {
	s.mu.Lock()
	s.closed = true
	mp, reverse := s.modern, s.reverse
	s.modern = nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { stopAll(mp) })
	wg.Go(s.trans.close)
	if !reverse {
		stopAll(s.sessionsProcs())
	}
	wg.Wait()
	s.stops.Wait()
}

func (s *shared) Pending() int {
	var n int
	for _, p := range s.sessionsProcs() {
		n += p.m.Pending()
	}
	s.mu.Lock()
	mp := s.modern
	s.mu.Unlock()
	for _, p := range mp {
		n += p.m.Pending()
	}
	return n + s.trans.pending()
}

// Interface guards.
var (
	_ Server = (*shared)(nil)
)
