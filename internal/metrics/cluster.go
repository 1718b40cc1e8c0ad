package metrics

import "github.com/prometheus/client_golang/prometheus"

// This file is the metrics of a replica among several (gateway.cluster):
// which replica it is, how many it sees alive, whether Redis answers, and
// what it did with requests for sessions other replicas hold. Registered
// by the gateway only with a cluster, so that one replica exports none of
// them.

// Replica names this replica, for mcpgate_cluster_info.
type Replica struct {
	Instance  string // its id for this process life
	Advertise string // host:port the other replicas reach it at
	// Redis is true when a Redis is configured; without one there is no
	// mcpgate_cluster_redis_up nor mcpgate_cluster_dropped_releases_total.
	Redis bool
}

// ClusterStats are read at each scrape; the counters are monotonic.
type ClusterStats struct {
	LiveReplicas int  // with a heartbeat within the last three, this one included
	RedisUp      bool // Redis answered the last call
	// Requests for owner-bound sessions of other replicas: forwarded to
	// their owner, answered 404 because the owner could not be reached,
	// or because it had no heartbeat, or answered 504 because the owner
	// took the request and began no answer in time (it is wedged).
	Forwarded, OwnerUnreachable, OwnerGone, OwnerTimeout uint64
	Resumed                                              uint64 // portable sessions of other replicas resumed here
	StoreErrors                                          uint64 // handoff records and revocations Redis refused
	DroppedReleases                                      int64  // shared in-flight and session counts not given back (queue full)
}

// Outcomes of mcpgate_cluster_forwarded_requests_total.
const (
	ForwardForwarded        = "forwarded"
	ForwardOwnerUnreachable = "owner_unreachable"
	ForwardOwnerGone        = "owner_gone"
	ForwardOwnerTimeout     = "owner_timeout"
)

var (
	clusterLiveDesc = prometheus.NewDesc("mcpgate_cluster_live_replicas",
		"Replicas with a recent heartbeat in Redis, this one included, as of its last heartbeat that reached Redis (1 without Redis).", nil, nil)
	clusterRedisUpDesc = prometheus.NewDesc("mcpgate_cluster_redis_up",
		"1 while Redis answers this replica, 0 while it does not (sealed sessions keep working; limits fall back to their share).", nil, nil)
	clusterForwardedDesc = prometheus.NewDesc("mcpgate_cluster_forwarded_requests_total",
		"Requests for owner-bound sessions of other replicas, by outcome: forwarded to their owner, answered 404 because the owner could not be reached (owner_unreachable) or had no heartbeat (owner_gone), or answered 504 because the owner took the request and began no answer in time (owner_timeout).", []string{"outcome"}, nil)
	clusterResumedDesc = prometheus.NewDesc("mcpgate_cluster_resumed_sessions_total",
		"Portable sessions of other replicas resumed by this one, without a new initialize.", nil, nil)
	clusterStoreErrorsDesc = prometheus.NewDesc("mcpgate_cluster_store_errors_total",
		"Handoff records and revocations of sessions that Redis failed to store.", nil, nil)
	clusterDroppedDesc = prometheus.NewDesc("mcpgate_cluster_dropped_releases_total",
		"Shared in-flight and session counts not given back to Redis because the queue was full (they expire instead).", nil, nil)
)

// WatchCluster exports replica as mcpgate_cluster_info{instance,advertise}
// 1 and the stats read by read at each scrape (it must be safe for
// concurrent use and not block). Call it once, before serving.
func (m *Metrics) WatchCluster(replica Replica, read func() ClusterStats) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcpgate_cluster_info", Help: "Always 1; its labels name this replica: instance (its id for this process life) and advertise (where the other replicas reach it).",
		ConstLabels: prometheus.Labels{"replica": replica.Instance, "advertise": replica.Advertise},
	}, func() float64 { return 1 }))
	m.reg.MustRegister(clusterCollector{redis: replica.Redis, read: read})
}

// clusterCollector reads the cluster's stats at each scrape.
type clusterCollector struct {
	redis bool
	read  func() ClusterStats
}

// Describe implements prometheus.Collector.
func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clusterLiveDesc
	ch <- clusterForwardedDesc
	ch <- clusterResumedDesc
	ch <- clusterStoreErrorsDesc
	if c.redis {
		ch <- clusterRedisUpDesc
		ch <- clusterDroppedDesc
	}
}

// Collect implements prometheus.Collector.
func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.read()
	ch <- prometheus.MustNewConstMetric(clusterLiveDesc, prometheus.GaugeValue, float64(s.LiveReplicas))
	for _, o := range []struct {
		outcome string
		n       uint64
	}{{ForwardForwarded, s.Forwarded}, {ForwardOwnerUnreachable, s.OwnerUnreachable}, {ForwardOwnerGone, s.OwnerGone}, {ForwardOwnerTimeout, s.OwnerTimeout}} {
		ch <- prometheus.MustNewConstMetric(clusterForwardedDesc, prometheus.CounterValue, float64(o.n), o.outcome)
	}
	ch <- prometheus.MustNewConstMetric(clusterResumedDesc, prometheus.CounterValue, float64(s.Resumed))
	ch <- prometheus.MustNewConstMetric(clusterStoreErrorsDesc, prometheus.CounterValue, float64(s.StoreErrors))
	if c.redis {
		ch <- prometheus.MustNewConstMetric(clusterRedisUpDesc, prometheus.GaugeValue, bit(s.RedisUp))
		ch <- prometheus.MustNewConstMetric(clusterDroppedDesc, prometheus.CounterValue, float64(s.DroppedReleases))
	}
}

var _ prometheus.Collector = clusterCollector{}
