package gateway

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener bounds the connections open at once. At the limit, Accept
// waits for one of them to close: the kernel's listen backlog holds the
// newcomers meanwhile (and refuses them when it is full), so a flood of
// idle connections costs the gateway no file descriptors or goroutines
// beyond the limit. Close unblocks a waiting Accept.
type limitListener struct {
	net.Listener
	slots chan struct{} // one token per open connection; capacity is the limit

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
}

func newLimitListener(ln net.Listener, limit int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, limit), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back on its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// firstByteListener gives a new connection, until its first byte arrives,
// the grace of an idle keep-alive one (idle: the gateway's IdleTimeout).
// net/http starts ReadHeaderTimeout when it accepts a connection, but for
// every later request only when its first bytes arrive. A client that
// dials a connection and keeps it idle in its pool before its first
// request (Go's transport does when a connection freed meanwhile serves
// the request it dialed for) then had it closed after HeaderTimeout, and a
// request it sent as the gateway closed it got no answer: EOF, which a
// client does not retry for a POST. So until the first byte the deadline
// is idle's, and net/http's read deadlines are held back; the last one it
// asked for then applies, counted from that byte.
type firstByteListener struct {
	net.Listener
	idle time.Duration
}

func newFirstByteListener(ln net.Listener, idle time.Duration) *firstByteListener {
	return &firstByteListener{Listener: ln, idle: idle}
}

func (l *firstByteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &firstByteConn{Conn: c}
	fc.waiting.Store(true)
	now := time.Now()
	fc.askedAt = now
	if err := c.SetReadDeadline(now.Add(l.idle)); err != nil {
		fc.waiting.Store(false) // no deadlines to hold back
	}
	return fc, nil
}

// firstByteConn holds net/http's read deadlines back until its first byte.
type firstByteConn struct {
	net.Conn
	waiting atomic.Bool // no byte read yet; changes under mu
	mu      sync.Mutex
	asked   time.Time // the read deadline net/http last asked for while waiting
	askedAt time.Time // when it asked
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.waiting.Load() {
		c.mu.Lock()
		if c.waiting.Load() {
			c.waiting.Store(false)
			d := c.asked
			if !d.IsZero() {
				d = time.Now().Add(c.asked.Sub(c.askedAt))
			}
			_ = c.Conn.SetReadDeadline(d)
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *firstByteConn) SetReadDeadline(t time.Time) error {
	if c.waiting.Load() {
		c.mu.Lock()
		if c.waiting.Load() {
			c.asked, c.askedAt = t, time.Now()
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *firstByteConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}
