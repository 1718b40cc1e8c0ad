package front

import (
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file is what the front tells of the requests it answers, for
// metrics: which JSON-RPC errors are a policy's refusals (for the
// Observer's records, internal/audit), the POSTs in flight, and the
// sessions by target and era. Config.Observer gets one audit.Record per
// client request exactly where the audit log gets its line.

// isDenial reports whether a JSON-RPC error is a policy's refusal (see
// guardedConn.denial): the code alone is also that of a server's invalid
// params.
func isDenial(code int, msg string) bool {
	return code == CodePolicyDenied && strings.HasPrefix(msg, "mcpgate: ") && strings.Contains(msg, " is not allowed") &&
		strings.Contains(msg, " by the policy of ")
}

// track counts a POST of msgs the limits admitted as in flight until
// release (InFlight), when it carries a request; release as it is without
// an Observer.
func (h *Handler) track(release func(), msgs []jsonrpc.Message) func() {
	if release == nil || countRequests(msgs) == 0 {
		return release
	}
	return h.cfg.Audit.Track(release)
}

// enter counts a POST of msgs the limits admitted as in flight (InFlight),
// when it carries a request and there is an Observer: the caller then
// calls Config.Audit.Leave once it is answered. track, without a closure.
func (h *Handler) enter(msgs []jsonrpc.Message) bool {
	return countRequests(msgs) > 0 && h.cfg.Audit.Enter()
}

// InFlight returns the POSTs being answered that carry requests, of
// either era (a legacy POST until its replies are on its session's
// stream) and of the stateless revision. It is 0 without
// Config.Observer.
func (h *Handler) InFlight() int64 { return h.cfg.Audit.InFlight() }

// SessionCount is how many sessions one target has of one era.
type SessionCount struct {
	Target string // the server's or the endpoint's name
	Kind   string // "server" or "endpoint"
	Era    string // the negotiated protocol version, or "legacy-sse"
	N      int
}

// EraLegacySSE is the SessionCount.Era of a 2024-11-05 HTTP+SSE session.
const EraLegacySSE = "legacy-sse"

// SessionCounts counts the established sessions (initialized, or a legacy
// session's stream opened) by target and era; a stateless request, which
// the Handler records as a session while it runs, is not one.
func (h *Handler) SessionCounts() []SessionCount {
	type key struct{ target, era string }
	counts := map[key]int{}
	for _, s := range h.store.Snapshot() {
		if _, ok := s.Established(); !ok {
			continue
		}
		era := EraLegacySSE
		if !s.Legacy() {
			era = s.Version()
		}
		counts[key{s.Server, era}]++
	}
	out := make([]SessionCount, 0, len(counts))
	for k, n := range counts {
		c := SessionCount{Target: k.target, Kind: "server", Era: k.era, N: n}
		if name, ok := strings.CutPrefix(k.target, endpointKeyPrefix); ok {
			c.Kind, c.Target = "endpoint", name
		}
		out = append(out, c)
	}
	return out
}
