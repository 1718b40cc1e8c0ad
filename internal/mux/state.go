package mux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Phase is where a server is in its lifecycle, as the Mux sees it.
type Phase int

// The phases of a server. See State for the transitions.
const (
	Starting   Phase = iota // a process (or remote session) is up and being initialized
	Ready                   // initialized: requests are forwarded
	BackingOff              // exited or failed to initialize; a retry is scheduled
	Failed                  // closed for good, or (Modern) not a 2026-07-28 server: no retry will come
)

func (p Phase) String() string {
	switch p {
	case Starting:
		return "starting"
	case Ready:
		return "ready"
	case BackingOff:
		return "backing off"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// State is a snapshot of a server's lifecycle.
//
// Transitions (each sets Since to the time of the change):
//
//	(New)                      -> Starting
//	Started(gen)               -> Starting   Reason nil
//	initialize done            -> Ready      Reason nil
//	Exited(gen, err)           -> BackingOff Reason err (the process's exit), RetryAt zero
//	Waiting(err, d)            -> BackingOff Reason err, RetryAt now+d
//	initialize failed          -> BackingOff Reason the init error; the process is
//	                              restarted through the upstream's
//	                              Restart(gen, reason); when it cannot restart
//	                              (CanRestart false: a remote upstream) the Mux
//	                              retries the initialize itself after a
//	                              backoff, RetryAt set
//	Close                      -> Failed     Reason "gateway is shutting down"
//
// A Modern Mux (Options.Modern) probes with server/discover instead of
// initializing (modern.go):
//
//	probe found a 2026-07-28 server -> Ready  Reason nil
//	probe answered otherwise   -> Failed     Reason matches ErrNotModern; the
//	                              process keeps running (its owner may stop
//	                              it); its next generation is probed again
//	probe unanswered in time   -> BackingOff Reason matches ErrNotModern,
//	                              RetryAt set; the same process is probed
//	                              again then
//
// While Starting, client requests wait (bounded by their context and by
// readyWait, or InitTimeout while the server has never been Ready); while BackingOff or Failed they are answered at once with an
// error naming the Reason.
type State struct {
	Phase   Phase
	Reason  error     // why the server is not Ready; nil when Starting or Ready
	Since   time.Time // when Phase was entered
	RetryAt time.Time // BackingOff: when the next attempt is due; zero if unknown
}

// State returns the server's current state. Safe for concurrent use.
func (m *Mux) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// FirstStart reports whether no process generation has been ready yet:
// the server is on its first start (a first npx -y download), which
// requests wait longer for (startWaitLocked).
func (m *Mux) FirstStart() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.everReady
}

// logReady logs that generation gen became Ready, with its startup time:
// from Started (just after the process started, or the remote session was
// opened) to the gateway's initialize answered (a Modern Mux: its probe).
// One line per process of a shared server is what an operator wants to
// see (is it up, how long did `npx -y` take, did it restart); an exclusive
// Mux (isolation "session", a remote per client session) logs at debug, as
// its first generation is Ready before any initialize (the client's own is
// forwarded) and the session's open is logged by the HTTP front.
func (m *Mux) logReady(gen uint64) {
	m.mu.Lock()
	if m.gen != gen {
		m.mu.Unlock()
		return // replaced already: its successor logs its own
	}
	startup := time.Since(m.genStart)
	m.mu.Unlock()
	level := slog.LevelInfo
	if m.mode == modeExclusive {
		level = slog.LevelDebug
	}
	if !m.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, 4)
	if up := m.upstreamNow(); up != nil {
		if pid := up.PID(); pid != 0 {
			attrs = append(attrs, slog.Int("pid", pid))
		}
	}
	attrs = append(attrs, slog.Uint64("gen", gen), slog.Duration("startup", startup.Round(time.Millisecond)))
	if gen > 1 {
		attrs = append(attrs, slog.Uint64("restarts", gen-1))
	}
	m.log.LogAttrs(context.Background(), level, "server ready", attrs...)
}

// setStateLocked records a transition. Called with m.mu held.
func (m *Mux) setStateLocked(p Phase, reason error, retryAt time.Time) {
	m.state = State{Phase: p, Reason: reason, Since: time.Now(), RetryAt: retryAt}
}

// unavailableLocked returns the error a client request gets at once when
// the server is backing off or failed, or nil when it may wait or proceed.
// It reads e.g. `mcpgate: server "memory" is not available: upstream:
// server process exited: exit status 1 ...; retrying in 3.2s`.
func (m *Mux) unavailableLocked() error {
	st := m.state
	if st.Phase != BackingOff && st.Phase != Failed {
		return nil
	}
	if st.Phase == Failed && errors.Is(st.Reason, errClosed) {
		return errClosed
	}
	err := m.notAvailable(st.Reason)
	if st.Phase == BackingOff {
		if d := time.Until(st.RetryAt); !st.RetryAt.IsZero() && d > 0 {
			return retryLater(fmt.Errorf("%w; retrying in %v", err, d.Round(100*time.Millisecond)), d)
		}
		return retryLater(fmt.Errorf("%w; restarting", err), time.Second)
	}
	return err
}

// startWaitLocked is how long a request may wait for a server that is
// starting: readyWait (or the request timeout, if shorter) once the server
// has been ready, and up to InitTimeout while it never was, since a first
// `npx -y` or `uvx` start may download for a minute or more and the
// gateway's own initialize waits that long for it. Called with m.mu held.
func (m *Mux) startWaitLocked() time.Duration {
	if !m.everReady {
		return m.opts.InitTimeout
	}
	return min(readyWait, m.opts.Timeout)
}

// stillStartingLocked is the error of a request that waited wait for a
// server still starting: worth retrying once the gateway's own initialize
// of the process has had its time. Called with m.mu held.
func (m *Mux) stillStartingLocked(wait time.Duration) error {
	err := fmt.Errorf("mcpgate: server %q is still starting after %v", m.opts.Name, wait)
	if !m.everReady {
		err = fmt.Errorf("%w (its first start; see /readyz)", err)
	}
	return retryLater(err, time.Until(m.genStart.Add(m.opts.InitTimeout)))
}

// notAvailable is the error clients get for a server that is down because
// of reason (errExited if nil). It carries the only "mcpgate:" prefix of
// the message: reason must not start with one.
func (m *Mux) notAvailable(reason error) error {
	if reason == nil {
		reason = errExited
	}
	return fmt.Errorf("mcpgate: server %q is not available: %w", m.opts.Name, reason)
}

// Waiting is called by the upstream's supervisor before it sleeps d ahead
// of the next start, with why (the previous generation's exit error or a
// failed spawn). Requests are answered at once with that reason until the
// next Started.
func (m *Mux) Waiting(err error, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if err == nil {
		err = errExited
	}
	m.setStateLocked(BackingOff, err, time.Now().Add(d))
	m.wakeLocked()
}

// wakeLocked wakes every request waiting for the server to be ready, so it
// looks at the state again. Called with m.mu held.
func (m *Mux) wakeLocked() {
	if m.readyLocked() {
		return // ready stays closed while the generation is ready
	}
	close(m.ready)
	m.ready = make(chan struct{})
}

// Init retry backoff for upstreams that cannot be restarted (remote ones):
// doubled after each failed attempt, from initRetryMin up to initRetryMax.
const (
	initRetryMin = time.Second
	initRetryMax = 30 * time.Second
)

// initFailed records that generation gen failed to initialize and arranges
// a retry: through the upstream's Restart when it has one (a fresh process
// is the best cure for a wedged one), else by initializing again after a
// backoff. Runs on the init goroutine of gen; reports whether that
// goroutine should initialize gen again now.
func (m *Mux) initFailed(gen uint64, err error) bool {
	m.mu.Lock()
	if m.closed || m.gen != gen || !m.running {
		m.mu.Unlock()
		return false // the process is gone already: Exited/Waiting tell the story
	}
	d := initRetryMin << min(m.initFails, 5)
	d = min(d, initRetryMax)
	m.initFails++
	if refusedErr(err) {
		m.refused = err
	}
	up := m.restarterLocked()
	var retryAt time.Time
	if up == nil {
		retryAt = time.Now().Add(d)
	}
	m.setStateLocked(BackingOff, err, retryAt)
	m.wakeLocked()
	m.mu.Unlock()
	if up != nil {
		up.Restart(gen, err.Error()) // err says "initialize failed: ..."
		return false
	}
	return m.retryAfter(gen, d)
}

// restarterLocked returns the upstream when it can restart a generation
// (CanRestart), else nil, as before SetUpstream. Called with m.mu held.
func (m *Mux) restarterLocked() upstream.Upstream {
	if !m.restarts {
		return nil
	}
	return m.up // written before restarts, which is read under mu
}

// retryAfter waits d (or until Close), then reports whether generation gen
// still runs, making it Starting again for one more try.
func (m *Mux) retryAfter(gen uint64, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-m.ctx.Done():
		return false
	case <-t.C:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	again := !m.closed && m.gen == gen && m.running
	if again {
		m.setStateLocked(Starting, nil, time.Time{})
	}
	return again
}

// readyLocked reports whether the current process generation runs and is
// initialized. Called with m.mu held.
func (m *Mux) readyLocked() bool { return m.running && m.readyGen == m.gen }

// waitReady blocks until the current process generation is initialized.
// It fails at once when the server is backing off or failed (the error
// names why), or the session or the Mux is closed (also while it waits),
// and after startWaitLocked while it is still starting.
func (c *Client) waitReady(ctx context.Context) error {
	m := c.m
	var life context.Context // c.lifetime(), once it must wait
	var timer *time.Timer
	var wait time.Duration
	for {
		m.mu.Lock()
		closed, ready, gone := m.closed, m.ready, c.closed
		ok := m.readyLocked()
		var unavailable error
		if !ok && !closed {
			unavailable = m.unavailableLocked()
		}
		if timer == nil {
			wait = m.startWaitLocked()
		}
		m.mu.Unlock()
		switch {
		case gone:
			return c.closedErr()
		case closed:
			return errClosed
		case ok:
			if timer != nil {
				timer.Stop()
			}
			return nil
		case unavailable != nil:
			return unavailable
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
			life = c.lifetime()
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.ctx.Done():
			return errClosed
		case <-life.Done():
			return c.closedErr()
		case <-timer.C:
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.stillStartingLocked(wait)
		}
	}
}
