package eras

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file lets a session of the reverse bridge move between replicas of
// the gateway. The session is gateway state only (the server of
// 2026-07-28 has none): what its requests need is what the client said in
// initialize, the level of its last logging/setLevel and the resources it
// subscribed to. NewReverseHandoff tells its owner that after each change;
// ResumeReverse builds the session again from it elsewhere.

// ReverseSession is what a session of the reverse bridge keeps: the
// version negotiated, the client's capabilities and clientInfo objects
// (nil when it sent none), which go in the _meta of each of its requests,
// the level of its last logging/setLevel (a JSON string as the client
// sent it; nil: none), which goes there too, and the URIs it subscribed
// to (sorted), which its listen asks for. The receiver must not modify
// them.
type ReverseSession struct {
	Version       string
	Capabilities  json.RawMessage
	ClientInfo    json.RawMessage
	Level         json.RawMessage
	Subscriptions []string
}

// meta returns the _meta every request of the session carries.
func (s ReverseSession) meta() map[string]json.RawMessage {
	meta := map[string]json.RawMessage{
		protocol.MetaProtocolVersion:    json.RawMessage(strconv.Quote(protocol.StatelessVersion)),
		protocol.MetaClientCapabilities: json.RawMessage(`{}`),
	}
	if rawObject(s.Capabilities) {
		meta[protocol.MetaClientCapabilities] = s.Capabilities
	}
	if rawObject(s.ClientInfo) {
		meta[protocol.MetaClientInfo] = s.ClientInfo
	}
	if len(s.Level) > 0 && s.Level[0] == '"' {
		meta[protocol.MetaLogLevel] = s.Level
	}
	return meta
}

// NewReverseHandoff is NewReverse whose session tells onState what
// another replica needs to resume it (ResumeReverse) after each change:
// each initialize it answers (before the answer goes out), each
// logging/setLevel (before its answer), and each resources/subscribe or
// unsubscribe that changed its set. onState is called on the goroutine of
// the change, never under the session's lock, and one call at a time,
// each with a state newer than the last: a change made while another is
// being told is told by that goroutine once it is done, so its answer
// may go out first.
func NewReverseHandoff(open func(context.Context, conn.Stream) (conn.StatelessConn, error), general conn.Stream, timeout time.Duration, log *slog.Logger, onState func(ReverseSession)) conn.Conn {
	c := newReverseConn(open, general, timeout, log)
	c.onState = onState
	return c
}

// ResumeReverse returns the session of the reverse bridge that s describes,
// initialized already (on another replica): it asks the server's
// server/discover through open (bounded by ctx), as the initialize did,
// sends its requests with s's level, and holds the session's listen, for
// s's subscriptions too. onState is as for NewReverseHandoff (told of the
// changes made here; not of s itself), and may be nil.
func ResumeReverse(ctx context.Context, open func(context.Context, conn.Stream) (conn.StatelessConn, error), general conn.Stream, timeout time.Duration, log *slog.Logger, s ReverseSession, onState func(ReverseSession)) (conn.Conn, error) {
	sc, err := open(ctx, general)
	if err != nil {
		return nil, err
	}
	discover, err := sc.ServerInit(ctx)
	sc.Close()
	if err != nil {
		return nil, err
	}
	if _, err := InitializeResult(discover, s.Version); err != nil {
		return nil, err // the session could not have initialized on it
	}
	c := newReverseConn(open, general, timeout, log)
	c.onState = onState
	c.version, c.meta, c.discover = s.Version, s.meta(), bytes.Clone(discover)
	c.session = ReverseSession{Version: s.Version, Capabilities: s.Capabilities, ClientInfo: s.ClientInfo}
	for _, uri := range s.Subscriptions {
		c.subs[uri] = struct{}{}
	}
	c.relisten()
	return c, nil
}

// tell tells onState the session's state, unless another goroutine is
// telling it, which then tells it again once done (so the last call
// always has the newest state, and calls never overlap). Nothing is told
// before the session initialized: a state without a version has nothing
// to resume.
func (c *reverseConn) tell() {
	if c.onState == nil {
		return
	}
	c.mu.Lock()
	if c.telling {
		c.retell = true
		c.mu.Unlock()
		return
	}
	c.telling = true
	for {
		c.retell = false
		s, ok := c.stateLocked()
		c.mu.Unlock()
		if ok {
			c.onState(s)
		}
		c.mu.Lock()
		if !c.retell {
			c.telling = false
			c.mu.Unlock()
			return
		}
	}
}

// stateLocked returns what another replica needs to resume the session,
// and false before it initialized. c.mu is held.
func (c *reverseConn) stateLocked() (ReverseSession, bool) {
	if c.version == "" {
		return ReverseSession{}, false
	}
	s := c.session
	s.Level = c.meta[protocol.MetaLogLevel]
	if len(c.subs) > 0 {
		s.Subscriptions = slices.Sorted(maps.Keys(c.subs))
	}
	return s, true
}

// ApplyReverse gives c, a session of NewReverseHandoff or ResumeReverse,
// the level and subscriptions of s: a newer state of the same session,
// which its connection on another replica told its onState after a
// logging/setLevel or a resources/(un)subscribe there. The requests that
// follow carry s's level; the session's listen is renewed for s's set if
// that differs from c's (as a subscribe here renews it). c's onState is
// not told: s is known already. Its version, capabilities and clientInfo
// are the session's initialize's and stay. A session closed, not
// initialized here yet, or not of the reverse bridge is left as it is.
func ApplyReverse(c conn.Conn, s ReverseSession) {
	rc, ok := c.(*reverseConn)
	if !ok {
		return
	}
	rc.mu.Lock()
	if rc.closed || rc.version == "" {
		rc.mu.Unlock()
		return
	}
	if level := rc.meta[protocol.MetaLogLevel]; !bytes.Equal(level, s.Level) {
		meta := maps.Clone(rc.meta) // replaced, not changed: calls running hold the old one
		if len(s.Level) > 0 && s.Level[0] == '"' {
			meta[protocol.MetaLogLevel] = s.Level
		} else {
			delete(meta, protocol.MetaLogLevel)
		}
		rc.meta = meta
	}
	changed := len(s.Subscriptions) != len(rc.subs)
	subs := make(map[string]struct{}, len(s.Subscriptions))
	for _, uri := range s.Subscriptions {
		subs[uri] = struct{}{}
		if _, had := rc.subs[uri]; !had {
			changed = true
		}
	}
	if changed {
		rc.subs = subs
	}
	rc.mu.Unlock()
	if changed {
		rc.relisten()
	}
}
