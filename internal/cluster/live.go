package cluster

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file keeps the live view: each heartbeat writes this replica's
// expiry into one sorted set and reads back the members that have not
// expired, so Alive and Live answer from memory, without a round trip.

// Beat announces this replica once and refreshes the live view: one
// transaction (SET of the instance key, ZADD of its expiry, removal of the
// expired members, read of the rest). Run calls it every Heartbeat; it is
// the only call tried while Redis is down, and the one that marks it up.
func (c *Cluster) Beat(ctx context.Context) error {
	now := c.cfg.Now()
	ttl := c.heartbeatTTL()
	nowMS := strconv.FormatInt(now.UnixMilli(), 10)
	var members *redis.ZSliceCmd
	err := c.try(ctx, func(ctx context.Context) error {
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, c.keys.instance(c.cfg.Instance), c.cfg.Advertise, ttl)
			p.ZAdd(ctx, c.keys.instances(), redis.Z{Score: float64(now.Add(ttl).UnixMilli()), Member: c.cfg.Instance})
			p.ZRemRangeByScore(ctx, c.keys.instances(), "-inf", "("+nowMS)
			members = p.ZRangeByScoreWithScores(ctx, c.keys.instances(), &redis.ZRangeBy{Min: nowMS, Max: "+inf"})
			return nil
		})
		return err
	})
	if err != nil {
		c.mu.Lock()
		c.upSince = time.Time{}
		c.mu.Unlock()
		return err
	}
	view := make(map[string]struct{}, len(members.Val())+1)
	beats := make(map[string]time.Time, len(members.Val()))
	for _, z := range members.Val() {
		id, _ := z.Member.(string)
		view[id] = struct{}{}
		// The score is the member's expiry: its last beat was a TTL before.
		beats[id] = time.UnixMilli(int64(z.Score)).Add(-ttl)
	}
	view[c.cfg.Instance] = struct{}{}
	beats[c.cfg.Instance] = now
	c.mu.Lock()
	c.view, c.viewAt, c.live = view, now, len(view)
	if c.upSince.IsZero() {
		c.upSince = now
	}
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	for id, at := range beats {
		c.seen[id] = at
	}
	for id, at := range c.seen {
		if now.Sub(at) > seenFor {
			delete(c.seen, id)
		}
	}
	c.mu.Unlock()
	return nil
}

// seenFor is how long an instance that left the live view is remembered as
// gone: longer than any session of it lives.
const seenFor = 48 * time.Hour

// Alive reports whether instance sent a heartbeat within the last three
// (as of the last beat). known is false when the view is too old to tell
// (Redis down for three beats, or none), and for an instance this replica
// never saw in its view (one that started since the last beat, whose
// sessions other replicas may already be asked for): the caller decides,
// e.g. by dialing. An instance is known gone only once a view listed it,
// no view has for three heartbeats, and this replica has reached Redis for
// three heartbeats in a row: a Redis that restarted empty, or came back
// after an outage, lists an instance only once it beat again. This replica
// is always alive and known.
func (c *Cluster) Alive(instance string) (alive, known bool) {
	if instance == c.cfg.Instance {
		return true, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.viewAt.IsZero() || c.cfg.Now().Sub(c.viewAt) > c.heartbeatTTL() {
		return false, false
	}
	if _, alive = c.view[instance]; alive {
		return true, true
	}
	last, seen := c.seen[instance]
	now, ttl := c.cfg.Now(), c.heartbeatTTL()
	return false, seen && now.Sub(last) > ttl && !c.upSince.IsZero() && now.Sub(c.upSince) >= ttl
}

// Live is the number of live replicas at the last beat that reached Redis
// (this one included, so at least 1). The limits divide by it when Redis
// is down.
func (c *Cluster) Live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// heartbeatTTL is how long an instance counts as alive after a beat.
func (c *Cluster) heartbeatTTL() time.Duration { return 3 * c.cfg.Heartbeat }
