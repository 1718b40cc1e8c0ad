package front

import (
	"maps"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file holds what a configuration reload may change under a running
// Handler: the targets (servers and endpoints), their policies and the
// Authenticator. They live in one immutable snapshot behind an
// atomic.Pointer: a request loads it once in front (one atomic load on the
// hot path) and sees one consistent configuration to its end, while
// SetTargets swaps in the next one for the requests that come after.
//
// Sessions keep what they were opened with: their connection and their
// owner; their requests are judged by the policy of the current snapshot
// (policyOf), so a reload's policy applies to open sessions at once. A
// session whose target is gone or replaced is ended by its owner with
// CloseTarget.

// Targets are the parts of Config that SetTargets replaces: see the fields
// of the same names in Config.
type Targets struct {
	Backends  map[string]conn.Backend
	Endpoints map[string]conn.Backend
	Policies  map[string]conn.Policy
	Auth      auth.Authenticator
}

// targets is one snapshot of Targets, with the backends under the front's
// middleware (layers.go). Never modified once stored.
type targets struct {
	backends  map[string]*served
	endpoints map[string]*served
	policies  map[string]conn.Policy // by target key (policy.go)
	// gone are the policies of the targets the previous snapshot served
	// and this one does not: their sessions stay open until the reload's
	// CloseTarget, under the policy last in force.
	gone map[string]conn.Policy
	auth auth.Authenticator
}

// newTargets builds the snapshot of t, its targets traced by tr (nil:
// not traced); the maps are copied (layered), so the caller may reuse its
// own.
func newTargets(t Targets, current policyOf, tr trace.Tracer) *targets {
	return &targets{
		backends:  layerAll(t.Backends, t.Policies, "", current, tr),
		endpoints: layerAll(t.Endpoints, t.Policies, endpointKeyPrefix, current, tr),
		policies:  maps.Clone(t.Policies),
		auth:      t.Auth,
	}
}

// SetTargets replaces the servers, endpoints, policies and Authenticator
// that new requests see. Requests already past their front checks finish
// with the ones they started with; sessions keep their connections. Safe
// to call concurrently with requests; calls must not overlap each other
// (the gateway serializes its reloads).
func (h *Handler) SetTargets(t Targets) {
	next := newTargets(t, h.policyOf, h.cfg.Tracer)
	prev := h.tg.Load()
	keep := func(key string) {
		if !next.serves(key) {
			if next.gone == nil {
				next.gone = map[string]conn.Policy{}
			}
			next.gone[key] = prev.policies[key] // nil: it had none
		}
	}
	for name := range prev.backends {
		keep(name)
	}
	for name := range prev.endpoints {
		keep(endpointKeyPrefix + name)
	}
	h.tg.Store(next)
}

// serves reports whether the snapshot has a target at key.
func (t *targets) serves(key string) bool {
	if name, isEndpoint := strings.CutPrefix(key, endpointKeyPrefix); isEndpoint {
		_, ok := t.endpoints[name]
		return ok
	}
	_, ok := t.backends[key]
	return ok
}

// policyOf is the policy of target key in the current targets (nil:
// none): each request of a session is judged by the policy in force when
// it arrives. A key a reload just removed has the policy it had last
// (gone); false: one the current targets know nothing of, whose sessions
// keep the policy they were opened under (layerAll).
func (h *Handler) policyOf(key string) (conn.Policy, bool) {
	t := h.tg.Load()
	if t.serves(key) {
		return t.policies[key], true
	}
	pol, ok := t.gone[key]
	return pol, ok
}

// loadTargets returns the current snapshot.
func (h *Handler) loadTargets() *targets { return h.tg.Load() }

// authenticator returns the current Authenticator (nil: none).
func (h *Handler) authenticator() auth.Authenticator { return h.tg.Load().auth }

// CloseTarget ends every session of target key (a server's name, or
// EndpointKey of an endpoint), as Close does at shutdown: the requests in
// flight are answered with "mcpgate: " + reason. It returns how many
// sessions it ended, and waits (up to about closeWait) for them to end;
// their clients then get 404 for the session and initialize again. Call it
// after SetTargets took the target away or replaced it, so no new session
// lands on the old one.
func (h *Handler) CloseTarget(key, reason string) int {
	h.paramTools.forget(key) // its tools may differ now (paramheaders.go)
	ss := h.store.DeleteTarget(key)
	if len(ss) == 0 {
		return 0
	}
	done := make(chan struct{}, len(ss))
	for _, s := range ss {
		h.closers.add()
		go func(s *session.Session) {
			defer h.closers.done()
			defer func() { done <- struct{}{} }()
			h.closeSem <- struct{}{}
			defer func() { <-h.closeSem }()
			h.end(s, reason)
		}(s)
	}
	for range ss {
		<-done
	}
	return len(ss)
}

// notFound answers a path that serves nothing.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, "mcpgate: nothing at "+r.URL.Path+
		" (servers are at /servers/{name}/mcp, endpoints at /endpoints/{name}/mcp)")
}

// replaced reports whether target key no longer serves be's own Backend
// in the current snapshot: a reload replaced or removed it after the
// request took its snapshot.
func (h *Handler) replaced(key string, be *served) bool {
	t := h.loadTargets()
	cur, ok := t.backends[key]
	if name, isEndpoint := strings.CutPrefix(key, endpointKeyPrefix); isEndpoint {
		cur, ok = t.endpoints[name]
	}
	return !ok || cur.own != be.own
}
