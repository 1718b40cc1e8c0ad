package metrics

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var clusterNames = []string{
	"mcpgate_cluster_info", "mcpgate_cluster_live_replicas", "mcpgate_cluster_redis_up",
	"mcpgate_cluster_forwarded_requests_total", "mcpgate_cluster_resumed_sessions_total",
	"mcpgate_cluster_store_errors_total", "mcpgate_cluster_dropped_releases_total",
}

// TestClusterMetrics: the replica's name is an info gauge, its stats are
// read at each scrape, each outcome of a forward its own series.
func TestClusterMetrics(t *testing.T) {
	m := New(&fakeSource{})
	var live atomic.Int64
	live.Store(3)
	m.WatchCluster(Replica{Instance: "pod-a", Advertise: "10.0.0.1:8080", Redis: true}, func() ClusterStats {
		return ClusterStats{
			LiveReplicas: int(live.Load()), RedisUp: live.Load() > 1,
			Forwarded: 5, OwnerUnreachable: 2, OwnerGone: 1, OwnerTimeout: 8, Resumed: 4, StoreErrors: 6, DroppedReleases: 7,
		}
	})
	want := `
# HELP mcpgate_cluster_dropped_releases_total Shared in-flight and session counts not given back to Redis because the queue was full (they expire instead).
# TYPE mcpgate_cluster_dropped_releases_total counter
mcpgate_cluster_dropped_releases_total 7
# HELP mcpgate_cluster_forwarded_requests_total Requests for owner-bound sessions of other replicas, by outcome: forwarded to their owner, answered 404 because the owner could not be reached (owner_unreachable) or had no heartbeat (owner_gone), or answered 504 because the owner took the request and began no answer in time (owner_timeout).
# TYPE mcpgate_cluster_forwarded_requests_total counter
mcpgate_cluster_forwarded_requests_total{outcome="forwarded"} 5
mcpgate_cluster_forwarded_requests_total{outcome="owner_gone"} 1
mcpgate_cluster_forwarded_requests_total{outcome="owner_timeout"} 8
mcpgate_cluster_forwarded_requests_total{outcome="owner_unreachable"} 2
# HELP mcpgate_cluster_info Always 1; its labels name this replica: instance (its id for this process life) and advertise (where the other replicas reach it).
# TYPE mcpgate_cluster_info gauge
mcpgate_cluster_info{advertise="10.0.0.1:8080",replica="pod-a"} 1
# HELP mcpgate_cluster_live_replicas Replicas with a recent heartbeat in Redis, this one included, as of its last heartbeat that reached Redis (1 without Redis).
# TYPE mcpgate_cluster_live_replicas gauge
mcpgate_cluster_live_replicas LIVE
# HELP mcpgate_cluster_redis_up 1 while Redis answers this replica, 0 while it does not (sealed sessions keep working; limits fall back to their share).
# TYPE mcpgate_cluster_redis_up gauge
mcpgate_cluster_redis_up UP
# HELP mcpgate_cluster_resumed_sessions_total Portable sessions of other replicas resumed by this one, without a new initialize.
# TYPE mcpgate_cluster_resumed_sessions_total counter
mcpgate_cluster_resumed_sessions_total 4
# HELP mcpgate_cluster_store_errors_total Handoff records and revocations of sessions that Redis failed to store.
# TYPE mcpgate_cluster_store_errors_total counter
mcpgate_cluster_store_errors_total 6
`
	for _, c := range []struct{ live, up string }{{"3", "1"}, {"1", "0"}} {
		live.Store(int64(c.live[0] - '0'))
		exp := strings.NewReplacer("LIVE", c.live, "UP", c.up).Replace(want)
		if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(exp), clusterNames...); err != nil {
			t.Errorf("%s live: %v", c.live, err)
		}
	}
	if problems, err := testutil.GatherAndLint(m.Gatherer(), clusterNames...); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestClusterMetricsWithoutRedis: no Redis, no series about it.
func TestClusterMetricsWithoutRedis(t *testing.T) {
	m := New(&fakeSource{})
	m.WatchCluster(Replica{Instance: "pod-a", Advertise: "10.0.0.1:8080"}, func() ClusterStats { return ClusterStats{LiveReplicas: 1} })
	n, err := testutil.GatherAndCount(m.Gatherer(), clusterNames...)
	if err != nil {
		t.Fatal(err)
	}
	// info, live, four outcomes, resumed, store errors.
	if n != 8 {
		t.Errorf("%d series without Redis, want 8", n)
	}
	if n, _ := testutil.GatherAndCount(m.Gatherer(), "mcpgate_cluster_redis_up", "mcpgate_cluster_dropped_releases_total"); n != 0 {
		t.Errorf("%d Redis series without Redis", n)
	}
}
