package admission

import (
	"context"
	"net/http"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/session"
)

// Stage is one step of admission: it answers a request it refuses, and
// hands the others to next.
type Stage func(next http.Handler) http.Handler

// Chain composes stages in the order given: the first sees a request
// first, the last hands it to the handler the chain wraps.
func Chain(stages ...Stage) Stage {
	return func(h http.Handler) http.Handler {
		for i := len(stages) - 1; i >= 0; i-- {
			h = stages[i](h)
		}
		return h
	}
}

// Request is what admission knows of a request to a target, from the
// front's routing on: the stages fill it in, the transport reads it.
type Request struct {
	Key     string       // the target's session key (the front's)
	Kind    string       // "server" or "endpoint"
	Name    string       // the server's or the endpoint's name
	Backend conn.Backend // what serves the target
	// Auth authenticates the target's requests, as the front's targets
	// were when the request came; nil: nobody is asked.
	Auth auth.Authenticator

	limiter  *limits.Limiter // Limit; nil: no limits
	limitKey string          // the principal's key (PrincipalKey)

	// exchange is room for the request's audit.Exchange (Audit), in the
	// allocation of its context (With); nil for a Request made elsewhere.
	exchange *audit.Exchange
}

type requestKey struct{}

// requestContext is a context carrying a Request: the two in one
// allocation, on every request to a target.
type requestContext struct {
	context.Context
	req Request
}

// auditedContext is a requestContext with the room for the request's
// audit Exchange (WithExchange), which would else be an allocation of its
// own on every audited or observed POST.
type auditedContext struct {
	requestContext
	x audit.Exchange
}

func (c *requestContext) Value(key any) any {
	if key == (requestKey{}) {
		return &c.req
	}
	return c.Context.Value(key)
}

// With returns ctx carrying req, and the Request it carries: the stages
// after fill that one in.
func With(ctx context.Context, req Request) (context.Context, *Request) {
	c := &requestContext{Context: ctx, req: req}
	return c, &c.req
}

// WithExchange is With for a front whose requests may be audited
// (an Auditor is set): the context also holds the room for the request's
// audit Exchange, which the Audit stage then uses.
func WithExchange(ctx context.Context, req Request) (context.Context, *Request) {
	c := &auditedContext{requestContext: requestContext{Context: ctx, req: req}}
	c.req.exchange = &c.x
	return &c.requestContext, &c.req
}

// From returns the Request ctx carries; nil outside a chain.
func From(ctx context.Context) *Request {
	req, _ := ctx.Value(requestKey{}).(*Request)
	return req
}

// PrincipalKey is principal p as a key (a session's owner, a limits'
// principal): kind and name, "" for none. The kind has no NUL, so no two
// principals share a key.
func PrincipalKey(p *auth.Principal) string {
	if p == nil {
		return ""
	}
	return p.Kind + "\x00" + p.Name
}

// AdmitRequest checks the limits of a POST of msgs (the transport asks
// once it has read them): the release to call once the POST is answered,
// or why it is refused.
func (req *Request) AdmitRequest(msgs []jsonrpc.Message) (release func(), ref *limits.Refusal) {
	if req == nil || req.limiter == nil {
		return limits.NoRelease, nil
	}
	return req.limiter.AdmitRequest(req.limitKey, msgs)
}

// Limited reports whether the request's principal has limits.
func (req *Request) Limited() bool { return req != nil && req.limiter != nil }

// AdmitSession reserves one of the principal's sessions (the transport
// asks when it opens one): the caller calls commit with the session
// opened, or nil when it was not; nil commit without limits.
func (req *Request) AdmitSession() (commit func(*session.Session), ref *limits.Refusal) {
	if req == nil || req.limiter == nil {
		return nil, nil
	}
	return req.limiter.AdmitSession(req.limitKey)
}
