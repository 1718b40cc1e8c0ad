package gateway

import (
	"net"
	"sync"
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
