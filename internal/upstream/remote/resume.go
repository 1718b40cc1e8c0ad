package remote

import (
	"errors"
	"fmt"
)

// This file lets an upstream Streamable HTTP session outlive the Client
// that initialized it: OnSession tells the owner each session the Client
// starts (its id, its version and the initialize that started it), and a
// Client started with Config.Resume carries on with such a session. The
// gateway uses it to serve one client session from any of its replicas.

// Session is what another Client needs to carry on with an upstream
// Streamable HTTP session: the id the server gave (Mcp-Session-Id; "" for
// a server without sessions), the protocol version it agreed to, and the
// params of an initialize that can renew the session when the server has
// forgotten it (nil: it cannot be renewed, and requests then fail as they
// do for a Client whose renewal failed). Its slices are not modified by
// the Client, nor may the receiver modify them.
type Session struct {
	ID      string
	Version string
	Init    []byte
}

// validate returns the problems of a Session to resume: its id and version
// go into headers.
func (s *Session) validate() []error {
	var errs []error
	if !visibleASCII(s.ID, true) {
		errs = append(errs, errors.New("Resume.ID: not visible ASCII"))
	}
	if s.Version == "" || !visibleASCII(s.Version, false) {
		errs = append(errs, fmt.Errorf("Resume.Version %q: not a protocol version", s.Version))
	}
	return errs
}

// visibleASCII reports whether s is made of the characters the
// specification allows in a session id (0x21 to 0x7E), and not empty
// unless empty is allowed.
func visibleASCII(s string, empty bool) bool {
	if s == "" {
		return empty
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// resumeSession installs cfg.Resume as the Client's session. Its
// standalone stream is not opened: another Client (the replica that
// opened the session) may hold it, and the server allows one; it opens
// when HoldStream says this Client carries the client's stream.
// Called by Start.
func (c *Client) resumeSession() {
	r := c.cfg.Resume
	c.mu.Lock()
	c.sess = session{id: r.ID, version: r.Version, epoch: 1}
	c.init = r.Init
	c.onDemand = true
	c.mu.Unlock()
	// The owner knows this session: only a renewal is news.
	c.announced = announced{epoch: 1, version: r.Version, done: true}
}

// announced is the last session OnSession was told.
type announced struct {
	epoch   uint64
	version string
	done    bool
}

// announce tells OnSession the current session unless it was told already.
// Calls are ordered by announceMu and each reads the session then, so the
// last call always carries the newest session.
func (c *Client) announce() {
	if c.cfg.OnSession == nil {
		return
	}
	c.announceMu.Lock()
	defer c.announceMu.Unlock()
	c.mu.Lock()
	s := Session{ID: c.sess.id, Version: c.sess.version, Init: c.init}
	cur := announced{epoch: c.sess.epoch, version: c.sess.version, done: true}
	c.mu.Unlock()
	if cur == c.announced || s.Version == "" {
		return
	}
	c.announced = cur
	c.cfg.OnSession(s)
}

// Adopt switches the Client to session s, which another Client (on
// another replica) renewed after the server forgot the session both used:
// the requests that follow carry s's id, with no initialize of this
// Client's; the standalone stream of the old session ends and one of s
// opens if the Client holds it (HoldStream). OnSession is not told (its owner gave s). A Client that is
// closed, not in Streamable HTTP mode, or on s already, and an s that
// does not validate, are left as they are. Never blocks on the network.
func (c *Client) Adopt(s Session) {
	if len(s.validate()) > 0 {
		return
	}
	c.announceMu.Lock()
	defer c.announceMu.Unlock()
	c.mu.Lock()
	if c.closed || c.mode != modeHTTP || c.sess.id == s.ID {
		c.mu.Unlock()
		return
	}
	if c.sess.stopGET != nil {
		c.sess.stopGET()
	}
	c.sess = session{id: s.ID, version: s.Version, epoch: c.sess.epoch + 1}
	if s.Init != nil {
		c.init = s.Init
	}
	epoch := c.sess.epoch
	c.mu.Unlock()
	c.announced = announced{epoch: epoch, version: s.Version, done: true}
	c.startGET()
}
