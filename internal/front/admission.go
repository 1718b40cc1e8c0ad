package front

import (
	"net/http"
	"strings"

	"github.com/mcpgate/mcpgate/internal/admission"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file wires admission (internal/admission) in front of the
// transport, and holds the front's side of it: what a stage needs that
// only the front knows (the target a URL serves, the version header), and
// what the transport asks of the limits and tells the audit log.

// transport serves a request admitted to target req.
type transport func(w http.ResponseWriter, r *http.Request, req *admission.Request)

// admitted returns serve behind admission. This is the one order in which
// a request to a target is admitted; each stage answers the request
// itself when it refuses. The Host was checked before routing
// (admission.CheckHost in New), for every URL.
func (h *Handler) admitted(serve transport, audited func(*http.Request) bool) http.Handler {
	return admission.Chain(
		h.counted, // every request to a target, refused ones too (sessions_admin.go)
		admission.CheckOrigin(h.cfg.OriginAllowed), // Origin, before anything is revealed
		h.resolved, // the target: 404 for none; the admission.Request into the context
		admission.Authenticate(admission.Authentication{Resource: h.authTarget, Audit: h.cfg.Audit, Logger: h.log}), // the principal into the context (metadata.go: the resource)
		h.versioned,                           // MCP-Protocol-Version (compat.go)
		admission.Limit(h.limits),             // per-principal limits, asked by the transport (check, open)
		admission.Audit(h.cfg.Audit, audited), // the audit record of what audited says
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, admission.From(r.Context()))
	}))
}

// auditPOST: a /mcp URL's requests audited are its POSTs.
func auditPOST(r *http.Request) bool { return r.Method == http.MethodPost }

// auditAll: a legacy /messages URL's requests are all audited.
func auditAll(*http.Request) bool { return true }

// counted counts the requests to targets.
func (h *Handler) counted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		next.ServeHTTP(w, r)
	})
}

// resolved finds the request's target (a server or an endpoint) in the
// targets of the moment, answering 404 when there is none.
func (h *Handler) resolved(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := h.loadTargets() // the one load of the request's targets (targets.go)
		key, be, unknown := h.targetIn(t, r)
		if be == nil {
			writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, unknown)
			return
		}
		req := admission.Request{Key: key, Kind: "server", Name: key, Backend: be, Auth: t.auth}
		if name, ok := strings.CutPrefix(key, endpointKeyPrefix); ok {
			req.Kind, req.Name = "endpoint", name
		}
		with := admission.With
		if h.cfg.Audit != nil { // an audit log or an Observer: POSTs get an audit.Exchange
			with = admission.WithExchange
		}
		ctx, _ := with(r.Context(), req)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// versioned checks the MCP-Protocol-Version header. A POST without a
// session may be of the stateless revision, whose versions post checks
// itself.
func (h *Handler) versioned(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		onSession := r.Header.Get("Mcp-Session-Id") != "" || isMessagesPath(r.URL.Path)
		statelessPost := r.Method == http.MethodPost && !onSession
		if !statelessPost && !h.checkVersionHeader(w, r, onSession) { // compat.go
			return
		}
		next.ServeHTTP(w, r)
	})
}

// owner is the owner key of the principal of r (authenticated by
// admission): a session belongs to the principal that opened it
// (session.Session.Owner), and is unknown (404) to anyone else, as is a
// parked stateless request's requestState (mrtr.go).
func (h *Handler) owner(r *http.Request) string {
	if h.authenticator() == nil {
		return ""
	}
	return admission.PrincipalKey(conn.Principal(r.Context()))
}

// check checks the limits of a POST of msgs: it returns the release to
// call once the POST is answered, or why it is refused. A POST carrying a
// request counts as in flight for the Observer until released.
func (h *Handler) check(r *http.Request, msgs []jsonrpc.Message) (release func(), ref *limits.Refusal) {
	release, ref = admission.From(r.Context()).AdmitRequest(msgs)
	return h.track(release, msgs), ref // observe.go
}

// admit checks the limits of a POST of msgs (post: either era, and the
// stateless revision): it returns the release to call once the POST is
// answered, or answers the refusal itself and returns false.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, msgs []jsonrpc.Message, batch bool) (func(), bool) {
	// Not check: post counts the POST in flight itself (enter), with no
	// closure to allocate.
	release, ref := admission.From(r.Context()).AdmitRequest(msgs)
	if ref != nil {
		var id []byte
		if !batch && len(msgs) == 1 {
			id = msgs[0].Bytes(msgs[0].ID)
		}
		refuse(w, ref, id)
		return nil, false
	}
	return release, true
}

// refuse answers a request refused by a limit: 429 (503 for the global
// cap), Retry-After, and a JSON-RPC error with the request's id (null for
// a batch), and tells the audit log. It is only for a response not
// started: a refusal once a stream is open goes on the stream (legacy.go).
func refuse(w http.ResponseWriter, ref *limits.Refusal, id []byte) {
	if x, ok := w.(*audit.Exchange); ok {
		x.Refused(ref.AuditOutcome())
	}
	w.Header().Set("Retry-After", limits.RetryAfter(ref.Retry))
	writeErrorID(w, ref.HTTPStatus(), id, protocol.CodeServerError, "mcpgate: "+ref.Msg, nil)
}

// auditTarget is target key as the audit log names it.
func auditTarget(key string) audit.Target {
	if name, ok := strings.CutPrefix(key, endpointKeyPrefix); ok {
		return audit.Target{Kind: "endpoint", Name: name}
	}
	return audit.Target{Kind: "server", Name: key}
}
