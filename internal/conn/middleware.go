package conn

import "context"

// Middleware is one concern applied to a connection (a target's policy,
// tracing): it returns a Conn that does its part of each call and hands
// the call on to next. It must hand every method on, so that next's
// contract (one answer per request, CloseWith complete) holds for the
// wrapper too.
type Middleware func(next Conn) Conn

// Layer makes the Middleware of one open of a Backend: it gets the open's
// context (whose Principal is the session's) and general stream, and
// returns the general stream the Backend opens with (general itself when
// the concern adds nothing there) and the Middleware for the Conn opened.
type Layer func(ctx context.Context, general Stream) (Stream, Middleware)

// Wrap returns be with layer applied to every connection it opens, of a
// session or of a stateless request alike (its StatelessConn keeps its
// server's init and passthrough). Wraps compose: the last one applied is
// the outermost.
func Wrap(be Backend, layer Layer) Backend { return &wrapped{Backend: be, layer: layer} }

// wrapped is a Backend under a Layer. ServesStateless is be's.
type wrapped struct {
	Backend
	layer Layer
}

func (w *wrapped) Open(ctx context.Context, general Stream) (Conn, error) {
	general, mw := w.layer(ctx, general)
	c, err := w.Backend.Open(ctx, general)
	if err != nil {
		return nil, err
	}
	return mw(c), nil
}

func (w *wrapped) OpenStateless(ctx context.Context, general Stream, version string, caps []byte) (StatelessConn, error) {
	general, mw := w.layer(ctx, general)
	sc, err := w.Backend.OpenStateless(ctx, general, version, caps)
	if err != nil {
		return StatelessConn{}, err
	}
	return sc.WithConn(mw(sc.Conn)), nil
}
