package servers

import (
	"context"
	"log/slog"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// StatelessSession returns, for a server that serves requests of the
// stateless revision, a function opening a Conn of the session eras for
// one such request declaring caps, on the processes that serve them: the
// translated connection itself (a client of a shared multiplexer, whose
// initialize is answered locally) for a server of the session eras, or a
// session of the reverse bridge over its stateless connections for one of
// 2026-07-28. An aggregating endpoint serves its stateless requests with
// these. nil for a server without a stateless path, or for none (nil).
func StatelessSession(s Server, log *slog.Logger) func(ctx context.Context, general conn.Stream, caps []byte) (conn.Conn, error) {
	if s == nil || !s.ServesStateless() { // nil: a server that is not running
		return nil
	}
	return func(ctx context.Context, general conn.Stream, caps []byte) (conn.Conn, error) {
		open := s.OpenStateless
		if rs, ok := s.(*remoteServer); ok {
			// The reverse bridge opens later with contexts that carry no
			// principal: bind its credential now.
			var err error
			if open, err = rs.bindStateless(ctx); err != nil {
				return nil, err
			}
		}
		c, err := open(ctx, general, protocol.StatelessVersion, caps)
		if err != nil {
			return nil, err
		}
		if !c.Passthrough() {
			return c.Conn, nil
		}
		c.Close()
		return eras.NewReverse(func(ctx context.Context, general conn.Stream) (conn.StatelessConn, error) {
			return open(ctx, general, protocol.StatelessVersion, caps)
		}, general, 0, log.With("bridge", "reverse")), nil
	}
}
