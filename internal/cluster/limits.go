package cluster

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/limits"
)

// This file is the Redis side of the cluster-wide limits (limits.Shared):
// GCRA buckets and the in-flight slot in one script, so a POST with limits
// costs one round trip; session counts; and the queue of releases, sent
// off the reply path.

// admitScript checks the in-flight slot, then runs GCRA (the generic cell
// rate algorithm) over every bucket of one POST: all or nothing, checked
// in the local limiter's order so that a refusal reads the same.
//
// A bucket keeps one number, its theoretical arrival time (TAT): when the
// bucket would be full again, in microseconds of the caller's clock. A
// request at now conforms when max(TAT, now) - now <= tolerance, where
// tolerance = interval * (burst - 1) and interval = 1s / rate; it then
// moves TAT to max(TAT, now) + interval. A bucket whose TAT has passed is
// full, and so is one without a key: the key's TTL only collects garbage.
// The clock is an argument, not Redis's TIME, so that tests drive it and
// the script stays deterministic; but a TTL runs on Redis's clock, so it
// outlives the TAT by bucketSlack (see there): a key that expired at its
// TAT by Redis's clock would read as a full bucket to a request whose now
// is still before it, and admit it.
//
// KEYS[1..n]: the buckets; KEYS[n+1]: the in-flight counts, a hash of
// one count per replica (instance id), so that the slots of a replica
// that died count no more once it left the live view, even while the
// principal's requests keep the key alive.
// ARGV[1]: now (µs); ARGV[2]: max in flight (0: none taken);
// ARGV[3]: the counter's TTL (ms); ARGV[4]: bucketSlack (ms);
// ARGV[3+2i], ARGV[4+2i]: interval and tolerance (µs) of bucket i;
// ARGV[5+2n]: this replica's instance; ARGV[6+2n...]: the other live
// replicas' (whose counts are summed).
// Reply: {0, -1, 0} admitted; {1, i-1, wait µs} bucket i refused;
// {2, n, 0} the in-flight limit refused.
// Numbers are written with %.0f: Lua's default format keeps 14 digits, and
// a time in microseconds has 16.
var admitScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local n = #KEYS - 1
local maxFlight = tonumber(ARGV[2])
if maxFlight > 0 then
  local cur = 0
  for j = 5 + 2 * n, #ARGV do
    cur = cur + tonumber(redis.call('HGET', KEYS[n + 1], ARGV[j]) or '0')
  end
  if cur >= maxFlight then
    return {2, n, 0}
  end
end
local tats = {}
local pending = {}
for i = 1, n do
  local tat = pending[KEYS[i]]
  if tat == nil then
    tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  end
  if tat < now then
    tat = now
  end
  local wait = tat - now - tonumber(ARGV[4 + 2 * i])
  if wait > 0 then
    return {1, i - 1, math.ceil(wait)}
  end
  tats[i] = tat + tonumber(ARGV[3 + 2 * i])
  pending[KEYS[i]] = tats[i]
end
for i = 1, n do
  local ttl = math.max(1, math.ceil((tats[i] - now) / 1000)) + tonumber(ARGV[4])
  redis.call('SET', KEYS[i], string.format('%.0f', tats[i]), 'PX', string.format('%.0f', ttl))
end
if maxFlight > 0 then
  redis.call('HINCRBY', KEYS[n + 1], ARGV[5 + 2 * n], 1)
  redis.call('PEXPIRE', KEYS[n + 1], ARGV[3])
end
return {0, -1, 0}
`)

// bucketSlack is how long a bucket's key outlives its TAT. The TAT is in
// the callers' clock, the TTL runs on Redis's: the key must still be
// there for every request whose now is before the TAT, including one
// that reaches Redis later after its now than the write did (queued in
// the client under load, up to Timeout), one from a replica whose clock
// lags the writer's, and one in a test whose fake clock runs slower than
// Redis's. A key expiring at its TAT admitted them all as if the bucket
// were full. A minute is longer than all of these; it keeps about a
// hundred bytes per bucket of a principal seen in the last minute.
const bucketSlack = time.Minute

// sessionScript gives back ARGV[1] sessions of the counter KEYS[1], then
// takes one if fewer than ARGV[2] are counted; ARGV[3] is its TTL (ms),
// from the last session taken: a refusal keeps the TTL it had, so that
// the counts of a replica that crashed end with it even for a principal
// who keeps trying.
// Reply: 1 taken, 0 refused.
var sessionScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') - tonumber(ARGV[1])
if cur < 0 then
  cur = 0
end
local ok = 0
if cur < tonumber(ARGV[2]) then
  cur = cur + 1
  ok = 1
end
if cur > 0 and ok == 1 then
  redis.call('SET', KEYS[1], cur, 'PX', ARGV[3])
elseif cur > 0 then
  redis.call('SET', KEYS[1], cur, 'KEEPTTL')
else
  redis.call('DEL', KEYS[1])
end
return ok
`)

// releaseSlotScript gives back ARGV[1] of this replica's (ARGV[2]) count
// in the in-flight hash KEYS[1], dropping it at zero, and the hash with
// its last count.
var releaseSlotScript = redis.NewScript(`
local n = redis.call('HINCRBY', KEYS[1], ARGV[2], -tonumber(ARGV[1]))
if n <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[2])
  if redis.call('HLEN', KEYS[1]) == 0 then
    redis.call('DEL', KEYS[1])
  end
end
return n
`)

// releaseScript gives back ARGV[1] of the counter KEYS[1], deleting it at
// zero (a count never goes below).
var releaseScript = redis.NewScript(`
local n = redis.call('DECRBY', KEYS[1], ARGV[1])
if n <= 0 then
  redis.call('DEL', KEYS[1])
end
return n
`)

// Admit runs admitScript for req (limits.Shared).
func (c *Cluster) Admit(ctx context.Context, req limits.SharedRequest) (limits.SharedVerdict, error) {
	n := len(req.Rates)
	ks := make([]string, 0, n+1)
	args := make([]any, 0, 5+2*n)
	args = append(args, req.Now.UnixMicro(), req.MaxInFlight, c.cfg.InFlightTTL.Milliseconds(), bucketSlack.Milliseconds())
	for _, r := range req.Rates {
		interval, tolerance := gcra(r.PerSecond, r.Burst)
		ks = append(ks, c.keys.rate(req.Principal, r.Name))
		args = append(args, interval, tolerance)
	}
	if req.MaxInFlight > 0 {
		args = c.appendLive(args)
	}
	ks = append(ks, c.keys.inFlight(req.Principal))
	var reply []int64
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		reply, err = admitScript.Run(ctx, c.rdb, ks, args...).Int64Slice()
		return err
	})
	if err != nil {
		return limits.SharedVerdict{}, err
	}
	return parseVerdict(reply, n)
}

// parseVerdict reads admitScript's reply for a request of n rates.
func parseVerdict(reply []int64, n int) (limits.SharedVerdict, error) {
	if len(reply) != 3 {
		return limits.SharedVerdict{}, fmt.Errorf("cluster: admit script replied %d values, want 3", len(reply))
	}
	switch reply[0] {
	case 0:
		return limits.SharedVerdict{Refused: -1}, nil
	case 1:
		if reply[1] < 0 || reply[1] >= int64(n) || reply[2] < 0 {
			return limits.SharedVerdict{}, fmt.Errorf("cluster: admit script refused bucket %d (wait %dµs) of %d", reply[1], reply[2], n)
		}
		return limits.SharedVerdict{Refused: int(reply[1]), Retry: time.Duration(reply[2]) * time.Microsecond}, nil
	case 2:
		return limits.SharedVerdict{Refused: n, Retry: time.Second}, nil
	}
	return limits.SharedVerdict{}, fmt.Errorf("cluster: admit script replied status %d", reply[0])
}

// gcra is a bucket's emission interval and burst tolerance in
// microseconds: one token every interval, burst tokens at once.
func gcra(perSecond float64, burst int) (interval, tolerance int64) {
	if perSecond <= 0 {
		// No refill: the burst, once spent, is spent for as long as
		// the key lives (a day).
		return int64(24 * time.Hour / time.Microsecond), 0
	}
	interval = max(1, int64(math.Round(1e6/perSecond)))
	return interval, interval * int64(max(burst, 1)-1)
}

// AdmitSession runs sessionScript (limits.Shared).
func (c *Cluster) AdmitSession(ctx context.Context, principal string, maxSessions, ended int) (bool, error) {
	var ok int64
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		ok, err = sessionScript.Run(ctx, c.rdb, []string{c.keys.sessions(principal)},
			ended, maxSessions, c.cfg.SessionTTL.Milliseconds()).Int64()
		return err
	})
	return ok == 1, err
}

// appendLive appends this replica's instance, then the other live
// replicas' (the view of the last heartbeat), to args.
func (c *Cluster) appendLive(args []any) []any {
	args = append(args, c.cfg.Instance)
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.view {
		if id != c.cfg.Instance {
			args = append(args, id)
		}
	}
	return args
}

// release is one count to give back: of a counter, or of this replica's
// field of a hash (slot).
type release struct {
	key  string
	n    int
	slot bool
}

// Release queues n counts of principal to be given back (limits.Shared);
// past releaseQueue it drops them.
func (c *Cluster) Release(principal string, kind limits.Counted, n int) {
	if c.rdb == nil || n <= 0 {
		return
	}
	r := release{key: c.keys.inFlight(principal), n: n, slot: true}
	if kind == limits.Session {
		r = release{key: c.keys.sessions(principal), n: n}
	}
	select {
	case c.release <- r:
	default:
		c.dropped.Add(1)
	}
}

// releaseLoop sends the queued releases until ctx ends, then those still
// queued: a replica shutting down gives back the sessions it ended. Each
// call is bounded by Timeout, not by ctx (a release sent as ctx ends
// must not fail for it), and fails at once once Redis is known down. A
// release that fails while Redis is down is lost: its count expires with
// its key.
func (c *Cluster) releaseLoop(ctx context.Context) {
	bounded := context.WithoutCancel(ctx)
	send := func(r release) {
		err := c.call(bounded, func(ctx context.Context) error {
			if r.slot {
				return releaseSlotScript.Run(ctx, c.rdb, []string{r.key}, r.n, c.cfg.Instance).Err()
			}
			return releaseScript.Run(ctx, c.rdb, []string{r.key}, r.n).Err()
		})
		if err != nil {
			c.dropped.Add(1)
		}
	}
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case r := <-c.release:
					send(r)
				default:
					return
				}
			}
		case r := <-c.release:
			send(r)
		}
	}
}

var _ limits.Shared = (*Cluster)(nil)
