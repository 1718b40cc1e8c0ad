package admission

import (
	"net/http"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file holds the stages that check or record, in the order the
// front chains them: Origin, then (after authenticate.go) the limits and
// the audit record.

// CheckOrigin refuses (403) a request whose Origin header allowed does
// not admit: a DNS-rebinding page must learn nothing, not even which
// targets exist, so it comes before the front's routing.
func CheckOrigin(allowed func(origin string) bool) Stage {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if origin := r.Header.Get("Origin"); !allowed(origin) {
				WriteError(w, http.StatusForbidden, protocol.CodeInvalidRequest, "mcpgate: origin "+strconv.Quote(origin)+" is not allowed")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Limit gives the request's Request the per-principal limits l (nil:
// none) under its principal's key. The limits are checked where their
// inputs are known: AdmitRequest once the transport has read a POST's
// messages (a rate per tool needs the tools' names, and a POST of no
// request is never refused), AdmitSession when it opens a session.
func Limit(l *limits.Limiter) Stage {
	return func(next http.Handler) http.Handler {
		if l == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if req := From(r.Context()); req != nil {
				req.limiter, req.limitKey = l, PrincipalKey(conn.Principal(r.Context()))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Audit records the requests audited reports true for with a (nil: no
// audit log, nothing is wrapped): the transport answers on an
// audit.Exchange, whose lines are written once it has answered.
func Audit(a *audit.Auditor, audited func(*http.Request) bool) Stage {
	return func(next http.Handler) http.Handler {
		if a == nil || audited == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req := From(r.Context())
			if req == nil || !audited(r) {
				next.ServeHTTP(w, r)
				return
			}
			var x *audit.Exchange
			if req.exchange != nil && req.exchange.ResponseWriter == nil {
				x = a.BeginIn(req.exchange, w, r, audit.Target{Kind: req.Kind, Name: req.Name})
			} else {
				x = a.Begin(w, r, audit.Target{Kind: req.Kind, Name: req.Name})
			}
			defer x.Finish()
			next.ServeHTTP(x, r)
		})
	}
}

// WriteError answers with an HTTP status and a JSON-RPC error body (id
// null).
func WriteError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(jsonrpc.ErrorResponse(nil, code, msg))
}
