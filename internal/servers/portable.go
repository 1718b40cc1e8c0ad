package servers

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// The sessions of an "http" remote are portable: any replica of the
// gateway can serve them, since what they are lives at the remote (an
// upstream Streamable HTTP session, which any client holding its id may
// use) or in a few bytes (a reverse-bridge session is the client's
// initialize). The replica that opens one hands its state (handoff.go) to
// the front's sink; another builds the session again from it (Resume),
// with no initialize upstream. Every other kind of session is owner-bound:
// a stdio process, a legacy SSE stream ("sse" remotes), an endpoint's
// member sessions (conn.OwnerBound).
//
// An upstream session handed to a sink, or resumed, belongs to the
// cluster rather than to the replica: closing the connection leaves it at
// the remote (no DELETE), since another replica may be serving it.

// handoff is how one upstream session is handed between replicas: the
// front's sink, told each session the remote client starts, and the
// session to carry on with (nil: a new one).
type handoff struct {
	sink   func(state []byte)
	resume *remote.Session
	// register takes the function that switches the session's remote
	// client to an upstream session another replica renewed
	// (conn.OnStateUpdate); nil: none.
	register func(apply func(state []byte))
	// held takes, for a resumed session, the function that tells its
	// remote client whether the client's standalone stream is served
	// here, so that it holds the upstream session's one standalone
	// stream only then (conn.OnGeneralHeld); nil: none.
	held func(held func(bool))
}

// portable reports whether the upstream session is the cluster's: handed
// to a sink, or resumed from one.
func (h handoff) portable() bool { return h.sink != nil || h.resume != nil }

// portableFirstID returns where a portable upstream session's connection
// numbers its requests from (mux.Options.FirstID): a random place in
// [2^40, 2^52), so that the replicas writing to one upstream session at
// once never use the same id (a server may key its reply streams by id,
// and the spec wants an id unique in its session). Two replicas' ranges
// overlap only if their starts fall within the requests they make of each
// other: for a million requests each, a chance of about 2^-31.
func portableFirstID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	const low = 1 << 40
	return low + binary.BigEndian.Uint64(b[:])%(mux.MaxFirstID-low)
}

// configure sets the remote client's side of h.
func (h handoff) configure(rc *remote.Config) {
	if sink := h.sink; sink != nil {
		rc.OnSession = func(s remote.Session) { sink(upstreamState(s).encode()) }
	}
	rc.Resume = h.resume
	rc.KeepSession = h.portable()
}

// follow registers, with h's registrations, the function that gives c the
// upstream session of a newer state: another replica renewed the session
// (its remote forgot it), and c carries on with the new one rather than
// renewing it again (remote.Client.Adopt); and, for a resumed session,
// the one that tells c when it holds the session's standalone stream.
func (h handoff) follow(c *remote.Client) {
	if h.held != nil && h.resume != nil {
		// The upstream stream is opened only while held
		// (remote.Client.HoldStream): the replica that opened the
		// session, or one serving its client's standalone stream, holds
		// it, rather than every replica that resumed the session.
		h.held(c.HoldStream)
	}
	if h.register == nil {
		return
	}
	h.register(func(state []byte) {
		st, err := decodeHandoff(state)
		if err != nil || st.kind != kindUpstream || !st.initialized() {
			return
		}
		c.Adopt(*st.remoteSession())
	})
}

// Resume serves a session another replica opened, from the last state
// that replica's sink received: an upstream session the remote client
// carries on with (no initialize: the remote knows the session; if it has
// forgotten it, it is renewed as the opening replica would have), or a
// reverse-bridge session built again from its initialize, level and
// subscriptions. A handoff sink
// in ctx is told the state again when it changes. A state that does not
// parse, or whose kind the server's config no longer serves, is an error
// naming the server.
func (s *remoteServer) Resume(ctx context.Context, general conn.Stream, state []byte) (conn.Conn, error) {
	h, err := decodeHandoff(state)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", s.name, err)
	}
	switch {
	case h.kind == kindReverse && !s.reverse:
		return nil, fmt.Errorf("server %q: %w: a reverse-bridge session, and the server is no longer pinned to %s", s.name, errBadState, protocol.StatelessVersion)
	case h.kind == kindUpstream && s.reverse:
		return nil, fmt.Errorf("server %q: %w: an upstream session, and the server is now pinned to %s", s.name, errBadState, protocol.StatelessVersion)
	case !h.initialized():
		// Handed off before its initialize: nothing to carry on with.
		if s.reverse {
			return s.openReverse(ctx, general, nil)
		}
		return s.isolated.Open(ctx, general)
	case s.reverse:
		rs := h.reverseSession()
		return s.openReverse(ctx, general, &rs)
	}
	resume := h.remoteSession()
	return s.isolated.openWith(ctx, general, func(ctx context.Context) (*proc, error) { return s.spawnUpstream(ctx, resume) })
}

// openReverse opens a session of the reverse bridge, or resumes rs when
// not nil, telling ctx's handoff sink (if any) its state after each
// change: an initialize, a logging/setLevel, a subscription.
func (s *remoteServer) openReverse(ctx context.Context, general conn.Stream, rs *eras.ReverseSession) (conn.Conn, error) {
	bound, err := s.bindStateless(ctx)
	if err != nil {
		return nil, err
	}
	open := func(ctx context.Context, general conn.Stream) (conn.StatelessConn, error) {
		return bound(ctx, general, protocol.StatelessVersion, nil)
	}
	var onState func(eras.ReverseSession)
	if sink := conn.Handoff(ctx); sink != nil {
		onState = func(rs eras.ReverseSession) { sink(reverseState(rs).encode()) }
	}
	log := s.log.With("bridge", "reverse")
	var c conn.Conn
	if rs == nil {
		c = eras.NewReverseHandoff(open, general, s.timeout, log, onState)
	} else if c, err = eras.ResumeReverse(ctx, open, general, s.timeout, log, *rs, onState); err != nil {
		return nil, fmt.Errorf("server %q: resuming a reverse-bridge session: %w", s.name, err)
	}
	if register := conn.OnStateUpdate(ctx); register != nil {
		// A logging/setLevel or a subscription made through another
		// replica's connection of the session.
		register(func(state []byte) {
			if st, err := decodeHandoff(state); err == nil && st.kind == kindReverse && st.initialized() {
				eras.ApplyReverse(c, st.reverseSession())
			}
		})
	}
	return c, nil
}
