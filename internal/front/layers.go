package front

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/internal/admission"
	"github.com/mcpgate/mcpgate/internal/conn"
)

// This file is the one place where a target's Backend is put under the
// front's connection middleware (conn.Wrap), innermost first:
//
//  1. its policy (policy.go): requests naming what the principal may not
//     use refused, lists filtered, hidden resource updates dropped;
//  2. tracing (tracing.go), when Config.Tracer is set: outermost, so that
//     a request the policy refuses has its span too.
//
// Observation (observe.go) is not connection middleware: it follows each
// request where its HTTP answer is known, on the audit path.
//
// Each snapshot of the targets (targets.go) layers every target anew; the
// target's own Backend is kept beside the layered one, so that a request
// can tell whether a reload replaced its target (Handler.replaced).

// served is a target's Backend as the front serves it.
type served struct {
	conn.Backend // under the middleware: what requests use
	// own is the server's or endpoint's own Backend, the same in every
	// snapshot until a reload replaces it.
	own conn.Backend
}

// layer puts own, the Backend of target key, under the middleware: the
// policy that policy returns for key when each request arrives, then
// tracing by tr (nil: none).
func layer(own conn.Backend, key string, policy func(key string) conn.Policy, tr trace.Tracer) *served {
	be := guard(own, key, policy)
	if tr != nil {
		be = conn.Wrap(be, traceLayer(tr, key))
	}
	return &served{Backend: be, own: own}
}

// layerAll returns backends layered, each as target prefix + its name, in
// a map of their own. The policy of each is current's for its key; a
// target a reload removed keeps the policy of policies (the snapshot's)
// until its sessions end: the gateway ends them (CloseTarget) only after
// the swap, and they must not go unguarded meanwhile.
func layerAll(backends map[string]conn.Backend, policies map[string]conn.Policy, prefix string, current policyOf, tr trace.Tracer) map[string]*served {
	out := make(map[string]*served, len(backends))
	for name, be := range backends {
		key, own := prefix+name, policies[prefix+name]
		out[name] = layer(be, key, func(key string) conn.Policy {
			if pol, ok := current(key); ok {
				return pol
			}
			return own
		}, tr)
	}
	return out
}

// servedOf returns the target the front's lookup put in req (admission.go):
// always a *served, whose own Backend tells a reload's replacement.
func servedOf(req *admission.Request) *served { return req.Backend.(*served) }
