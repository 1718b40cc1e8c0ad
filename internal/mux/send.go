package mux

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/buffers"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// This file writes upstream. The rule: only a client request's own
// goroutine may wait for the upstream's queue, bounded by the request's
// context and deadline. Every other path (the reader, the timer, teardown,
// shutdown) uses TrySend: a best-effort message that cannot be queued at
// once is dropped and counted (DroppedSends), and a queued client request
// released on those paths is handed to a goroutine of its own.

var errNoUpstream = errors.New("mcpgate: no upstream connection yet")

// upstreamNow returns the upstream without waiting for SetUpstream. It
// reads m.up without upMu: SetUpstream writes it once, before it closes
// upCh, so a receive from the closed upCh orders that write before the
// read. This is on the path of every message; it takes no lock.
func (m *Mux) upstreamNow() upstream.Upstream {
	select {
	case <-m.upCh:
		return m.up
	default:
		return nil
	}
}

// tryWrite writes msg upstream without blocking: to process generation gen
// only when gen is not 0 (TrySendGen), else to whichever process runs
// (TrySend).
func (m *Mux) tryWrite(gen uint64, msg []byte) error {
	up := m.upstreamNow()
	if up == nil {
		return errNoUpstream
	}
	if gen != 0 {
		return up.TrySendGen(gen, msg)
	}
	return up.TrySend(msg)
}

// trySend writes a best-effort message without blocking; what names it in
// the (rate-limited) log line when it is dropped.
func (m *Mux) trySend(msg []byte, what string) bool {
	return m.trySendGen(0, msg, what)
}

// trySendGen is trySend restricted to process generation gen (0: any), for
// messages that belong to gen only: answers to its server requests and
// refusals of them.
func (m *Mux) trySendGen(gen uint64, msg []byte, what string) bool {
	err := m.tryWrite(gen, msg)
	if err == nil {
		return true
	}
	m.stats.droppedSends.Add(1)
	if ok, n := m.warnDropped.allow(); ok {
		if gen == 0 {
			m.log.Info("message not sent upstream; dropped", "what", what, "err", err, "suppressed", n)
		} else {
			m.log.Info("message not sent upstream; dropped", "what", what, "gen", gen, "err", err, "suppressed", n)
		}
	}
	return false
}

// sendBounded writes msg, waiting for room in the upstream's queue at most
// until ctx ends, the deadline (since m.epoch) passes or the Mux closes.
func (m *Mux) sendBounded(ctx context.Context, msg []byte, deadline time.Duration) error {
	up := m.upstreamNow()
	if up == nil {
		return errNoUpstream
	}
	ctx, cancel := context.WithDeadline(ctx, m.epoch.Add(deadline))
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	return up.Send(ctx, msg)
}

// isPending reports whether call id is still waiting for its answer.
func (m *Mux) isPending(id uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending[id] != nil
}

// sendPending writes the request of job j like sendBounded, but only while
// its call is pending: the wait ends as soon as the call is answered by
// someone else (cancelled, its session closed, the process exited), and a
// call answered already is not written at all. Slow path only: it
// allocates.
func (m *Mux) sendPending(ctx context.Context, msg []byte, j job) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.mu.Lock()
	c := m.pending[j.upID]
	if c == nil {
		m.mu.Unlock()
		return context.Canceled // answered: nothing left to fail
	}
	c.stopWrite = cancel
	m.mu.Unlock()
	err := m.sendBounded(ctx, msg, j.deadline)
	m.mu.Lock()
	if m.pending[j.upID] == c {
		c.stopWrite = nil
	}
	m.mu.Unlock()
	return err
}

// cancelUpstream tells the server to stop working on request id, best
// effort.
func (m *Mux) cancelUpstream(id uint64, reason string) {
	params := append([]byte(`{"requestId":`), appendUint(nil, id)...)
	params = append(params, `,"reason":`...)
	params = strconv.AppendQuote(params, reason)
	params = append(params, '}')
	m.trySend(jsonrpc.Notification(protocol.NotificationCancelled, params), protocol.NotificationCancelled)
}

// writeJob sends one client request upstream with its ids rewritten, on the
// request's own goroutine: TrySend first (the common case, allocation
// free), then Send bounded by ctx and the call's deadline. A failure fails
// the call (if it is still pending).
func (m *Mux) writeJob(ctx context.Context, j job) {
	bp, buf := spliceJob(j)
	m.stats.forwarded.Add(1)
	err := m.tryWrite(0, buf)
	if err != nil {
		err = m.sendPending(ctx, buf, j)
	}
	putBuf(bp, buf)
	if err != nil {
		m.writeFailed(j.upID, err)
	}
}

// spliceJob returns j's request with its id and progress token rewritten to
// j.upID, in a pooled buffer sized for it: give it back with putBuf once
// the upstream has taken it (Send and TrySend copy what they queue).
func spliceJob(j job) (*[]byte, []byte) {
	var num [20]byte
	id := appendUint(num[:0], j.upID)
	bp := buffers.Get(len(j.msg) + 2*len(id))
	return bp, jsonrpc.Splice((*bp)[:0], j.msg, jsonrpc.Edit{Span: j.id, Value: id}, jsonrpc.Edit{Span: j.token, Value: id})
}

// putBuf gives back buf, spliced into *bp by spliceJob.
func putBuf(bp *[]byte, buf []byte) {
	*bp = buf
	buffers.Put(bp)
}

// writeFailed fails call id after its write failed.
func (m *Mux) writeFailed(id uint64, err error) {
	m.finish(id, func(c *call) {
		if errors.Is(err, context.DeadlineExceeded) {
			// The server did not take the request before its deadline: to
			// the client that is a timeout like any other.
			m.stats.timedOut.Add(1)
			m.fail(c, protocol.CodeRequestTimeout, "request timed out: the server is not reading its input")
			return
		}
		m.fail(c, protocol.CodeServerError, clientText("writing to upstream server", err))
	})
}

// write sends jobs released from the maxInFlight queue. It runs on paths
// that must not wait on the server (the reader, the timer, teardown), so it
// only tries; a job the upstream's queue cannot take at once goes to a
// goroutine of its own that waits, bounded by the call's deadline and the
// Mux's life. Their number is bounded by MaxInFlight (each holds a slot),
// and a queue that stays full is the upstream's to resolve (it marks the
// process stuck and restarts it), so failing these calls at once instead
// would only turn a short burst into errors.
func (m *Mux) write(jobs []job) {
	for _, j := range jobs {
		if !m.isPending(j.upID) {
			continue // answered since it left the queue (cancelled, closed)
		}
		bp, buf := spliceJob(j)
		m.stats.forwarded.Add(1)
		err := m.tryWrite(0, buf)
		var msg []byte
		if err != nil {
			msg = bytes.Clone(buf) // the goroutine's own; buf goes back to the pool
		}
		putBuf(bp, buf)
		if err == nil {
			continue
		}
		if !m.spawn(func() {
			if err := m.sendPending(context.Background(), msg, j); err != nil {
				m.writeFailed(j.upID, err)
			}
		}) {
			m.writeFailed(j.upID, errClosed)
		}
	}
}
