package mux

import (
	"context"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file keeps the pending table: calls and their deadlines. It is on
// the path of every request, so it avoids allocating: a call holds short
// client ids and progress tokens inline, and deadlines are an intrusive list
// served by one timer. (Outgoing messages are spliced into pooled buffers:
// see send.go.)

// idKey is a client id as a map key without allocating a string. Ids longer
// than the array go to Client.long, keyed by string.
type idKey struct {
	n uint8
	b [39]byte
}

func makeKey(id []byte) (idKey, bool) {
	var k idKey
	if len(id) > len(k.b) {
		return k, false
	}
	k.n = uint8(len(id))
	copy(k.b[:], id)
	return k, true
}

// call is one request in flight upstream.
//
// Ownership: while in Mux.pending a call is guarded by Mux.mu. Whoever
// removes it from pending owns it from then on and is the only one to touch
// it again.
type call struct {
	upID   uint64
	client *Client // nil for the gateway's own requests
	key    idKey   // the client's raw id, when short
	long   string  // the client's raw id, when long
	id     []byte  // the client's raw id (aliases key.b or long's copy)
	tokBuf [24]byte
	token  []byte // the client's raw progress token (aliases tokBuf when short), or nil
	out    conn.Stream
	gen    uint64
	queued bool
	sent   bool
	// noServe: the server's answer does not count as Served (an
	// exclusive session's initialize).
	noServe bool
	// listen: a client's subscriptions/listen of a Modern Mux, open until
	// the client or the gateway's own listen ends it (modern_listen.go):
	// never written upstream, no deadline, no MaxInFlight slot, and it does
	// not make its client the sole writer a log message or other untagged
	// notification is attributed to.
	listen bool
	job    job // the write, kept while queued
	// stopWrite, when set, ends a write waiting for room in the upstream's
	// queue: whoever answers the call first also stops its write, so a
	// request cancelled, closed or failed is never written afterwards.
	stopWrite context.CancelFunc
	onReply   func(msg *jsonrpc.Message)
	// onGone, when set (the gateway's own round trips), is told instead of
	// onReply when the Mux fails the call itself (exit, Close): that is no
	// answer of the server, and must not read as one.
	onGone func(err error)

	deadline   time.Duration // since Mux.epoch
	prev, next *call         // deadline order, oldest first
}

func (c *call) setID(id []byte) {
	if k, ok := makeKey(id); ok {
		c.key = k
		c.id = c.key.b[:k.n]
		return
	}
	c.long = string(id)
	c.id = []byte(c.long)
}

func (c *call) setToken(tok []byte) {
	c.token = append(c.tokBuf[:0], tok...)
}

// job is one client request to write upstream with its id (and progress
// token) replaced by the upstream id.
type job struct {
	upID      uint64
	msg       []byte
	id, token jsonrpc.Span
	deadline  time.Duration // the call's, since Mux.epoch: bounds the write
}

// registerLocked adds c to the pending table under a new upstream id, with
// a deadline. Called with mu held.
func (m *Mux) registerLocked(c *call) {
	m.registerUntimedLocked(c)
	c.deadline = time.Since(m.epoch) + m.opts.Timeout
	c.prev, c.next = m.newest, nil
	if m.newest != nil {
		m.newest.next = c
	} else {
		m.oldest = c
		// A timer still set for an earlier call's deadline is left alone:
		// every call has the same timeout, so that deadline comes first,
		// and expire sets the timer for the oldest call then. Resetting it
		// for each call of a session that makes one at a time would touch
		// the runtime's timers, and wake its poller, once per call.
		if m.expiryAt == 0 {
			m.armExpiryLocked(c.deadline, m.opts.Timeout)
		}
	}
	m.newest = c
}

// armExpiryLocked sets the expiry timer to fire in d, at deadline (since
// m.epoch). Called with mu held.
func (m *Mux) armExpiryLocked(deadline, d time.Duration) {
	m.expiry.Reset(d)
	m.expiryAt = deadline
	m.expiryArms++
}

// registerUntimedLocked adds c to the pending table without a place in the
// deadline list: its owner (roundTrip) times it out itself, with a timeout
// of its own. Called with mu held.
func (m *Mux) registerUntimedLocked(c *call) {
	c.upID = m.nextID
	m.nextID++
	c.gen = m.gen
	m.pending[c.upID] = c
}

// wroteLocked counts a call of c written upstream; unwroteLocked one that
// finished. m.writers holds the joined clients with calls written.
func (m *Mux) wroteLocked(c *Client) {
	if c.written++; c.written == 1 && !c.closed {
		m.writers[c] = struct{}{}
	}
}

func (m *Mux) unwroteLocked(c *Client) {
	if c.written--; c.written == 0 {
		delete(m.writers, c)
	}
}

// forgetLocked undoes the bookkeeping of a call leaving the pending table.
func (m *Mux) forgetLocked(c *call) {
	m.unlinkLocked(c)
	if c.stopWrite != nil {
		c.stopWrite()
		c.stopWrite = nil
	}
	if c.client != nil {
		c.client.removeLocked(c)
		if c.sent && !c.listen {
			m.sending--
			m.unwroteLocked(c.client)
		}
	}
}

// unlinkLocked takes c out of the deadline list, if it is there: a pending
// call that no longer times out (an acknowledged listen of the gateway).
func (m *Mux) unlinkLocked(c *call) {
	if c.prev != nil {
		c.prev.next = c.next
	} else if m.oldest == c {
		m.oldest = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else if m.newest == c {
		m.newest = c.prev
	}
	c.prev, c.next = nil, nil
}

// expireLoop times out calls past their deadline. All calls of a Mux share
// one timeout, so registration order is deadline order and the oldest call
// is the next to expire: one timer serves them all.
func (m *Mux) expireLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.expiry.C:
		}
		m.expire()
	}
}

func (m *Mux) expire() {
	now := time.Since(m.epoch)
	m.mu.Lock()
	m.expiryAt = 0 // it fired
	var expired []*call
	for c := m.oldest; c != nil && c.deadline <= now; c = m.oldest {
		delete(m.pending, c.upID)
		m.forgetLocked(c)
		expired = append(expired, c)
	}
	if m.oldest != nil {
		m.armExpiryLocked(m.oldest.deadline, m.oldest.deadline-now)
	}
	next := m.dequeueLocked()
	m.mu.Unlock()
	// The callers hear first; the server's cancellations are best effort
	// and never wait for room in its queue.
	for _, c := range expired {
		m.stats.timedOut.Add(1)
		if ok, n := m.warnTimeout.allow(); ok {
			m.log.Warn("request timed out", "upstream_id", c.upID, "timeout", m.opts.Timeout, "suppressed", n)
		}
		m.fail(c, protocol.CodeRequestTimeout, "request timed out")
	}
	for _, c := range expired {
		if c.sent {
			m.cancelUpstream(c.upID, "request timed out")
		}
	}
	m.write(next)
}

// take removes call id from the pending table, if it is there, and returns
// it (now owned by the caller) with the queued writes its slot frees.
func (m *Mux) take(id uint64) (*call, []job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.pending[id]
	if c == nil {
		return nil, nil
	}
	delete(m.pending, id)
	m.forgetLocked(c)
	return c, m.dequeueLocked()
}

// finish removes call id if still pending and runs f on it outside the lock.
func (m *Mux) finish(id uint64, f func(*call)) bool {
	c, next := m.take(id)
	if c == nil {
		return false
	}
	f(c)
	m.write(next)
	return true
}
