package eras

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file lets a session of the reverse bridge move between replicas of
// the gateway. The session is gateway state only (the server of
// 2026-07-28 has none): what its requests need is what the client said in
// initialize. NewReverseHandoff tells its owner that after each
// initialize; ResumeReverse builds the session again from it elsewhere.

// ReverseSession is what a session of the reverse bridge keeps of its
// client's initialize: the version negotiated, and the client's
// capabilities and clientInfo objects (nil when it sent none), which go in
// the _meta of each of its requests. The receiver must not modify them.
type ReverseSession struct {
	Version      string
	Capabilities json.RawMessage
	ClientInfo   json.RawMessage
}

// meta returns the _meta every request of the session carries (before a
// logging/setLevel adds its level).
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
	return meta
}

// NewReverseHandoff is NewReverse whose session tells onInit what it
// keeps of each initialize it answers, before the answer goes out, on the
// goroutine of that initialize.
func NewReverseHandoff(open func(context.Context, conn.Stream) (conn.StatelessConn, error), general conn.Stream, timeout time.Duration, log *slog.Logger, onInit func(ReverseSession)) conn.Conn {
	c := newReverseConn(open, general, timeout, log)
	c.onInit = onInit
	return c
}

// ResumeReverse returns the session of the reverse bridge that s describes,
// initialized already (on another replica): it asks the server's
// server/discover through open (bounded by ctx), as the initialize did, and
// holds the session's listen. onInit is as for NewReverseHandoff (a client
// that initializes the session again), and may be nil.
func ResumeReverse(ctx context.Context, open func(context.Context, conn.Stream) (conn.StatelessConn, error), general conn.Stream, timeout time.Duration, log *slog.Logger, s ReverseSession, onInit func(ReverseSession)) (conn.Conn, error) {
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
	c.onInit = onInit
	c.version, c.meta, c.discover = s.Version, s.meta(), bytes.Clone(discover)
	c.relisten()
	return c, nil
}
