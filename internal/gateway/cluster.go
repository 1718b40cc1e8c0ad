package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/mcpgate/mcpgate/internal/cluster"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/limits"
)

// This file wires gateway.cluster: the replica's Cluster (internal/cluster)
// into the front (sealed session ids, forwarding, resuming) and the limits
// (counted once for all replicas while Redis answers).

// newCluster returns the Cluster of cfg's gateway.cluster; nil without one.
func newCluster(cfg *config.Config, log *slog.Logger) (*cluster.Cluster, error) {
	c := cfg.Gateway.Cluster
	if c == nil {
		return nil, nil
	}
	cc := cluster.Config{Instance: c.Instance, Advertise: c.Advertise, Heartbeat: c.Heartbeat, Logger: log}
	if c.Redis != nil {
		cc.RedisURL, cc.RedisPassword = c.Redis.URL, c.Redis.Password
	}
	return cluster.New(cc)
}

// useCluster hands cl to the front's config hc (and its limits).
func useCluster(hc *front.Config, cfg *config.Config, cl *cluster.Cluster) {
	if cl == nil {
		return
	}
	hc.Cluster = cl
	hc.SessionMaxAge = cfg.Gateway.Cluster.SessionMaxAge
	if hc.Limits != nil && cfg.Gateway.Cluster.Redis != nil {
		hc.Limits.Shared = cl
	}
}

// The Cluster is all the front and the limits need of the replicas.
var (
	_ front.Cluster = (*cluster.Cluster)(nil)
	_ limits.Shared = (*cluster.Cluster)(nil)
)

// storeHandoffs stores, before the listener closes, the handoff records
// of the portable sessions the store has not confirmed, for at most
// limit (within ctx): the other replicas resume them from those once
// this one is gone.
func (g *Gateway) storeHandoffs(ctx context.Context, limit time.Duration) {
	if g.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if stored, failed := g.Handler.StoreHandoffs(ctx); failed > 0 {
		g.log.Warn("draining: handoff records not stored; other replicas cannot resume those sessions", "stored", stored, "failed", failed)
	} else if stored > 0 {
		g.log.Info("draining: stored the handoff records the store had not confirmed", "stored", stored)
	}
}

// holdOwned keeps a draining replica's listener open while it holds
// sessions no other replica can serve (stdio servers', legacy ones), for
// at most hold: the other replicas forward their requests here, and a
// request they forward after the listener closed would find no owner
// (404). A replica of one, or holding only portable sessions, goes on at
// once.
func (g *Gateway) holdOwned(hold time.Duration) {
	if g.cluster == nil || g.Handler.OwnerBound() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	g.log.Info("draining: serving the sessions only this replica holds until the drain timeout", "sessions", g.Handler.OwnerBound())
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for g.Handler.OwnerBound() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
