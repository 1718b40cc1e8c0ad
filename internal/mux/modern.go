package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is the lifecycle of a Modern Mux (Options.Modern): a server
// that speaks protocol version 2026-07-28 itself is never initialized.
// Each process generation is probed with server/discover instead, as a
// dual-era client does before anything else (the revision's "era probe"):
// a result listing 2026-07-28 in supportedVersions makes it Ready; any
// other answer (an error, another result) or none within ProbeTimeout
// means it is not such a server. The probe's outcome is what Discovered
// reports to the owner, which decides what to do with a server that is
// not modern (backend: serve its stateless clients by translation through
// an initialized process instead). Its routing is in modern_route.go.
//
// Why a process of its own: a dual-era server built on the Go SDK decides
// how to ask its client for input from what its process saw first; after an
// initialize it sends server requests where a stateless client
// needs input_required results. So a Modern Mux never lets its process see
// initialize (nor any other request the revision removed).

// defaultProbeTimeout is Options.ProbeTimeout's default: the revision asks
// for "a reasonable timeout" without a number; a session-era server answers an
// unknown method at once or, some, never.
const defaultProbeTimeout = 5 * time.Second

// ErrNotModern is matched (errors.Is) by the error of a probe that found
// no 2026-07-28 server: see Discovered.
var ErrNotModern = errors.New("not a " + protocol.StatelessVersion + " server")

// probeError is why a probe found no 2026-07-28 server. It reads
// "not a 2026-07-28 server: " and the detail.
type probeError struct {
	detail string
	// retry: nothing was answered (no reply in time, or not written), so
	// the same process is probed again after a backoff: it may be slow to
	// start. A server that answered is not probed again until it restarts.
	retry bool
}

func (e *probeError) Error() string        { return ErrNotModern.Error() + ": " + e.detail }
func (e *probeError) Is(target error) bool { return target == ErrNotModern }

// ProbeRetries reports whether err, an ErrNotModern, is a probe left
// unanswered (it is tried again) rather than an answer that the server
// does not speak the revision (final for that process).
func ProbeRetries(err error) bool {
	var pe *probeError
	return errors.As(err, &pe) && pe.retry
}

// modernMeta is the _meta of the gateway's own requests (server/discover,
// its subscriptions/listen): the per-request keys the revision requires,
// with no client capability.
func (m *Mux) modernMeta() []byte {
	return fmt.Appendf(nil, `{%q:%q,%q:{},%q:{"name":"mcpgate","version":%q}}`,
		protocol.MetaProtocolVersion, protocol.StatelessVersion,
		protocol.MetaClientCapabilities, protocol.MetaClientInfo, m.opts.Version)
}

// discoverParams are the params of the gateway's own server/discover.
func (m *Mux) discoverParams() []byte {
	return append(append([]byte(`{"_meta":`), m.modernMeta()...), '}')
}

// runModernGen probes generation gen until it is Ready, it answers as a
// server that is not modern, or it is gone; then runs the liveness probe
// (when configured) while it lives. It runs on gen's goroutine (Started).
func (m *Mux) runModernGen(gen uint64) {
	for {
		err := m.discoverUpstream(gen)
		if err == nil {
			break
		}
		var pe *probeError
		if !errors.As(err, &pe) || !m.current(gen) {
			// Exited, closed or replaced during the probe: the exit line
			// (or the shutdown) says it all; the successor probes itself.
			m.log.Debug("server/discover probe ended with its process generation", "gen", gen, "err", err)
			return
		}
		if !m.probeFailed(gen, pe) {
			return
		}
	}
	if m.opts.PingInterval > 0 {
		m.probe(gen)
	}
}

// discoverUpstream sends generation gen the gateway's server/discover,
// bounded by ProbeTimeout, and makes gen Ready when the result lists
// protocol.StatelessVersion. It returns a *probeError when gen is not such a server,
// errGenGone or an error matching errExited or errClosed when gen ended.
func (m *Mux) discoverUpstream(gen uint64) error {
	result, err := m.roundTrip(gen, protocol.MethodServerDiscover, m.discoverParams(), m.opts.ProbeTimeout)
	var re *rpcError
	switch {
	case err == nil:
	case errors.As(err, &re):
		return &probeError{detail: "server/discover: " + re.Error()}
	case errors.Is(err, errExited) || errors.Is(err, errClosed):
		return err
	default: // no reply in time, or the write failed
		return &probeError{detail: err.Error(), retry: true}
	}
	var r struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(result, &r) != nil || !slices.Contains(r.SupportedVersions, protocol.StatelessVersion) {
		return &probeError{detail: fmt.Sprintf("its server/discover result lists supportedVersions %q", r.SupportedVersions)}
	}
	m.mu.Lock()
	if !m.closed && m.gen == gen && m.running {
		m.discover, m.probeErr = result, nil
	}
	m.mu.Unlock()
	if !m.markReady(gen) {
		return errGenGone
	}
	m.logReady(gen)
	return nil
}

// probeFailed records that generation gen is not (or not yet) a 2026-07-28
// server; it reports whether gen's goroutine should probe again now.
//
// A server that answered is Failed with that reason, for as long as its
// process runs: restarting it would get the same answer, and the owner
// decides whether to stop it. A server that did not answer is BackingOff
// and probed again after a backoff (doubling from 1s to 30s), on the same
// process: a slow start (a first `npx -y` download) must not cost a
// restart.
func (m *Mux) probeFailed(gen uint64, pe *probeError) bool {
	m.mu.Lock()
	if m.closed || m.gen != gen || !m.running {
		m.mu.Unlock()
		return false
	}
	m.probeErr = pe
	if !pe.retry {
		m.setStateLocked(Failed, pe, time.Time{})
		m.wakeLocked()
		m.mu.Unlock()
		m.log.Info("server is not a "+protocol.StatelessVersion+" server", "gen", gen, "err", pe)
		return false
	}
	d := min(initRetryMin<<min(m.initFails, 5), initRetryMax)
	m.initFails++
	m.setStateLocked(BackingOff, pe, time.Now().Add(d))
	m.wakeLocked()
	m.mu.Unlock()
	m.log.Info("server/discover probe unanswered; probing again", "gen", gen, "err", pe, "retry_in", d)
	return m.retryAfter(gen, d)
}

// Discovered waits for the outcome of a Modern Mux's probe and returns the
// server's server/discover result (the caller must not modify it) once a
// process generation is Ready.
//
// It returns at once: an error matching ErrNotModern when the latest probe
// found no 2026-07-28 server (it answered otherwise, or not within
// ProbeTimeout; reported until a later probe succeeds); the reason the
// server is not available while it is backing off or failed for another
// reason (a crash, a command not found); a shutdown error after Close. It
// waits while a probe is in progress, at most until ctx ends or
// min(30s, Options.Timeout) passes, like a request. A Mux that is not
// Modern never probes: Discovered fails at once.
func (m *Mux) Discovered(ctx context.Context) ([]byte, error) {
	if !m.opts.Modern {
		return nil, errors.New("mcpgate: the server is initialized, not probed with server/discover")
	}
	var timer *time.Timer
	var wait time.Duration
	for {
		m.mu.Lock()
		closed, wake, ok := m.closed, m.ready, m.readyLocked()
		result, probeErr := m.discover, m.probeErr
		var unavailable error
		if !closed && !ok && probeErr == nil {
			unavailable = m.unavailableLocked()
		}
		if timer == nil {
			wait = m.startWaitLocked()
		}
		m.mu.Unlock()
		switch {
		case closed:
			return nil, errClosed
		case ok:
			return result, nil
		case probeErr != nil:
			return nil, probeErr
		case unavailable != nil:
			return nil, unavailable
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.ctx.Done():
			return nil, errClosed
		case <-timer.C:
			m.mu.Lock()
			defer m.mu.Unlock()
			return nil, m.stillStartingLocked(wait)
		}
	}
}

// Passthrough reports whether c is a client of a Modern Mux: its server
// speaks 2026-07-28 itself, so a stateless client's requests go up as they
// came and the server's messages come back as they went, but for the ids
// the Mux rewrites (request ids, progress tokens, subscription ids) and
// subscriptions/listen, which the Mux serves from a listen of its own
// (modern_listen.go). The
// caller must not translate them, and forwards server/discover too (a
// request like any other; ServerInit also returns its result).
func (c *Client) Passthrough() bool { return c.m.opts.Modern }
