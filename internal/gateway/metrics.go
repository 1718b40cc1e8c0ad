package gateway

import (
	"strings"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/metrics"
	"github.com/mcpgate/mcpgate/internal/servers"
)

// This file wires gateway.metrics: a metrics.Metrics of the gateway's own
// (a private registry: tests start many gateways in one process), fed by
// the HTTP front's request records and reading the handler, the servers
// and the audit log at scrape time.

// setupMetrics sets hc's Metrics and Observer when gateway.metrics is on.
// The scrape-time source reads g.Handler, set once front.New returns:
// no request is served before.
func (g *Gateway) setupMetrics(hc *front.Config) {
	if !g.cfg.Gateway.Metrics {
		return
	}
	m := metrics.New(&metricsSource{g: g, audit: hc.Audit})
	exportOps(m, hc.Audit, g.auditFile) // metrics_ops.go
	g.exportCluster(m)
	hc.Metrics, hc.Observer = m.Handler(), requestObserver{m}
}

// exportCluster registers the cluster's metrics on m, when this gateway
// is one replica of several.
func (g *Gateway) exportCluster(m *metrics.Metrics) {
	cl := g.cluster
	if cl == nil {
		return
	}
	m.WatchCluster(metrics.Replica{Instance: cl.Instance(), Advertise: cl.Advertise(), Redis: g.cfg.Gateway.Cluster.Redis != nil},
		func() metrics.ClusterStats {
			s := metrics.ClusterStats{LiveReplicas: cl.Live(), RedisUp: !cl.Down(), DroppedReleases: cl.Dropped()}
			if h := g.Handler; h != nil {
				f := h.Forwards()
				s.Forwarded, s.OwnerUnreachable, s.OwnerGone, s.OwnerTimeout = f.Forwarded, f.Failed, f.Gone, f.Silent
				s.Resumed, s.StoreErrors = f.Resumed, f.StoreErrors
			}
			return s
		})
}

// requestObserver hands the front's records to the metrics.
type requestObserver struct{ m *metrics.Metrics }

func (o requestObserver) Request(r audit.Record) {
	o.m.Request(&metrics.Request{
		Target: r.Target, Kind: r.Kind, Method: r.Method, Outcome: r.Outcome,
		Duration: r.Duration, BytesIn: int64(r.BytesIn), BytesOut: r.BytesOut,
	})
}

// metricsSource is metrics.Source over a gateway.
type metricsSource struct {
	g     *Gateway
	audit *audit.Auditor // the configured audit log; nil: none
}

func (s *metricsSource) Sessions() []metrics.Sessions {
	h := s.g.Handler
	if h == nil {
		return nil
	}
	counts := h.SessionCounts()
	out := make([]metrics.Sessions, len(counts))
	for i, c := range counts {
		out[i] = metrics.Sessions{Target: c.Target, Kind: c.Kind, Era: c.Era, N: c.N}
	}
	return out
}

func (s *metricsSource) InFlight() int64 {
	if h := s.g.Handler; h != nil {
		return h.InFlight()
	}
	return 0
}

func (s *metricsSource) Servers() []metrics.Server {
	_, srvs, _ := s.g.current() // as of the last reload (reload.go)
	out := make([]metrics.Server, 0, len(srvs))
	for name, srv := range srvs {
		ms := metrics.Server{Name: name, State: metrics.StatePerSession, Up: true, Pending: srv.Pending()}
		if !srv.PerSession() {
			var text string
			ms.Up, text = srv.Ready()
			ms.State = stateLabel(ms.Up, text)
			ms.Counters = counters(srv.Counters())
			ms.Processes = poolMetrics(srv.Info().Pool)
		}
		out = append(out, ms)
	}
	return out
}

func (s *metricsSource) AuditDropped() (int64, bool) {
	if s.audit == nil {
		return 0, false
	}
	return s.audit.Dropped(), true
}

// stateLabel maps a Server's Ready answer ("starting", "backing off: ...",
// "failed: ...") to the state label.
func stateLabel(ready bool, text string) string {
	switch {
	case ready:
		return metrics.StateReady
	case strings.HasPrefix(text, "starting"):
		return metrics.StateStarting
	case strings.HasPrefix(text, "backing off"):
		return metrics.StateBackoff
	}
	return metrics.StateFailed
}

// poolMetrics is each process of a server's pool ("processes"), in pool
// order; nil without a pool.
func poolMetrics(pool []servers.ProcessInfo) []metrics.Process {
	var out []metrics.Process
	for _, p := range pool {
		out = append(out, metrics.Process{Up: p.State == "ready", Sessions: p.Sessions, Pending: p.Pending,
			Restarts: p.Restarts, Forwarded: p.Counters.Mux.Forwarded})
	}
	return out
}

func counters(c servers.Counters) *metrics.Counters {
	st := c.Mux
	return &metrics.Counters{
		Restarts: c.Restarts, Forwarded: st.Forwarded, TimedOut: st.TimedOut, Garbage: st.Garbage,
		UnknownReplies: st.UnknownReplies, Unroutable: st.Unroutable, OversizedLines: st.OversizedLines,
		DroppedProgress: st.DroppedProgress, QueueFull: st.QueueFull, DroppedSends: st.DroppedSends,
		DroppedNotifications: st.DroppedNotifications, LivenessFailures: st.LivenessFailures,
		ServerRequestsOverLimit: st.ServerRequestsOverLimit, TasksForgotten: st.TasksForgotten,
	}
}
