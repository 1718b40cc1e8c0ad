package conn

import (
	"context"
	"net/http"

	"github.com/mcpgate/mcpgate/internal/auth"
)

// The front gives a request's handling (Backend.Open, OpenStateless and
// Conn.Handle) a context carrying who sent it and, for a stateless
// request, its headers; the layers below read them here.

type principalKey struct{}

// WithPrincipal returns ctx carrying principal p, as the front gives it to
// a request's handling.
func WithPrincipal(ctx context.Context, p *auth.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Principal returns the principal of the request whose handling got ctx
// (Backend.Open, Backend.OpenStateless and Conn.Handle get the
// request's context), or nil: authentication is off, or the target is not
// protected and the request named nobody.
func Principal(ctx context.Context) *auth.Principal {
	p, _ := ctx.Value(principalKey{}).(*auth.Principal)
	return p
}

type requestHeaderKey struct{}

// WithRequestHeader gives the connection of a forwarded stateless request
// the POST's headers: a remote server of the revision checks the
// Mcp-Param-* headers its tools ask for.
func WithRequestHeader(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, requestHeaderKey{}, h)
}

// RequestHeader returns the headers of the stateless request whose
// connection's Handle got ctx, or nil.
func RequestHeader(ctx context.Context) http.Header {
	h, _ := ctx.Value(requestHeaderKey{}).(http.Header)
	return h
}
