package admission

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is authentication as a stage. Every request to a target (a
// server or an endpoint, on any URL of either era, routed by path or by
// host) is put to its Authenticator (Request.Auth) after the Host and
// Origin checks and the front's routing, and before anything else: a
// refusal is 401 or 403 with the Decision's WWW-Authenticate and a
// JSON-RPC error, and reveals nothing of sessions, versions or servers'
// states. The principal of a request that may go on travels in its
// context (conn.WithPrincipal), to the front, the limits, the audit log
// and the backends' Open and Handle.

// Authentication configures the Authenticate stage.
type Authentication struct {
	// Resource is the protected resource (RFC 9728) the request names of
	// its target key: the front's URLs; false when the request's host is
	// not a valid host name.
	Resource func(r *http.Request, key string) (auth.Target, bool)
	// Audit logs the refusals (nil: no audit log).
	Audit  *audit.Auditor
	Logger *slog.Logger
}

// Authenticate asks the target's Authenticator about each request: it
// hands the request on with its principal in its context, or answers the
// refusal itself. A request whose target has no Authenticator goes on as
// it is.
func Authenticate(a Authentication) Stage {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req := From(r.Context())
			if req == nil || req.Auth == nil {
				next.ServeHTTP(w, r)
				return
			}
			if r, ok := a.authenticate(w, r, req); ok {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// authenticate asks req.Auth about r. It returns r with its principal in
// its context, or answers the request itself with the refusal and returns
// false.
func (a *Authentication) authenticate(w http.ResponseWriter, r *http.Request, req *Request) (*http.Request, bool) {
	target, ok := a.Resource(r, req.Key)
	if !ok {
		WriteError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: the request's host (Host or X-Forwarded-Host) is not a valid host name")
		return nil, false
	}
	start := time.Now()
	if a.Audit != nil {
		start = a.Audit.Now()
	}
	d := req.Auth.Authenticate(r, target)
	if d.Status == 0 {
		if d.Principal == nil {
			return r, true
		}
		return r.WithContext(conn.WithPrincipal(r.Context(), d.Principal)), true
	}
	status := d.Status
	if status < 400 || status > 599 {
		status = http.StatusUnauthorized
	}
	// A challenge that could split the header (it never should) is left
	// out rather than sent.
	if d.Challenge != "" && !strings.ContainsAny(d.Challenge, "\r\n\x00") {
		w.Header().Set("WWW-Authenticate", d.Challenge)
	}
	if status == http.StatusServiceUnavailable && d.RetryAfter > 0 {
		// The credentials cannot be checked now (an issuer out of reach).
		w.Header().Set("Retry-After", limits.RetryAfter(d.RetryAfter))
	}
	reason := d.Reason
	if reason == "" {
		reason = "authentication required"
		if status == http.StatusForbidden {
			reason = "insufficient scope"
		}
	}
	a.Logger.Debug("request refused by authentication", slog.String(req.Kind, req.Name), "status", status, "reason", d.Reason)
	WriteError(w, status, protocol.CodeInvalidRequest, "mcpgate: "+reason+" for "+req.Kind+" "+req.Name)
	a.Audit.AuthRefused(r, audit.Target{Kind: req.Kind, Name: req.Name}, start, status, d.Refused)
	return nil, false
}
