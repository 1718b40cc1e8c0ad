package gateway

import "github.com/mcpgate/mcpgate/internal/metrics"

// Compat implements metrics.CompatSource: the HTTP front's counters of
// client quirks accepted and of requests without an id dropped.
func (s *metricsSource) Compat() metrics.Compat {
	h := s.g.Handler
	if h == nil {
		return metrics.Compat{}
	}
	c := h.CompatCounts()
	return metrics.Compat{
		VersionHeaderMismatch:     c.VersionHeaderMismatch,
		RequestsWithoutID:         c.RequestsWithoutID,
		InitializedWithoutSession: c.InitializedWithoutSession,
	}
}
