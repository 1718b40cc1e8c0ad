package cluster

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/session"
)

// This file holds what Redis keeps of sessions: the newest handoff state of
// a portable session, versioned (a replica's older write never replaces a
// newer one) and announced to every replica when it changes (statesync.go),
// and revocations (a tombstone every replica can ask for, and a message
// every replica hears).

// setStateScript keeps the newer of the stored handoff state and the one
// given, atomically, and publishes the change when the given one is
// stored: KEYS[1] the state's hash; ARGV: the version's N and Tie, the
// state, its time to live in milliseconds, the channel and the message.
// Versions are compared as session.StateVersion.Newer does (numbers below
// 2^53, exact in Lua). It returns 1 when the state was stored, 0 when the
// stored one is as new or newer.
var setStateScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'n', 'tie')
local n, tie = tonumber(ARGV[1]), tonumber(ARGV[2])
if cur[1] then
  local cn, ct = tonumber(cur[1]), tonumber(cur[2])
  if cn > n or (cn == n and ct >= tie) then
    return 0
  end
end
redis.call('HSET', KEYS[1], 'n', ARGV[1], 'tie', ARGV[2], 'state', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
`)

// SetState stores state, of version v, as the handoff state of session
// sid until expiry (the session's absolute expiry), unless Redis holds a
// version as new or newer: then the state is dropped, stored is false and
// the drop counted (StaleStates). A state stored is announced to every
// replica's OnStateChange callbacks, this one's included.
func (c *Cluster) SetState(ctx context.Context, sid string, v session.StateVersion, state []byte, expiry time.Time) (stored bool, err error) {
	ttl := expiry.Sub(c.cfg.Now())
	if ttl <= 0 {
		return false, nil
	}
	err = c.call(ctx, func(ctx context.Context) error {
		n, err := setStateScript.Run(ctx, c.rdb, []string{c.keys.state(sid)},
			v.N, v.Tie, state, max(ttl.Milliseconds(), 1), c.keys.stateChannel(), stateChange(sid, v)).Int64()
		stored = n == 1
		return err
	})
	if err == nil && !stored {
		c.staleStates.Add(1)
	}
	return stored, err
}

// State returns the newest handoff state of session sid and its version;
// nil (and no error) when Redis has none.
func (c *Cluster) State(ctx context.Context, sid string) ([]byte, session.StateVersion, error) {
	var vals []any
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		vals, err = c.rdb.HMGet(ctx, c.keys.state(sid), "n", "tie", "state").Result()
		return err
	})
	if err != nil || len(vals) != 3 || vals[2] == nil {
		return nil, session.StateVersion{}, err
	}
	n, _ := vals[0].(string)
	tie, _ := vals[1].(string)
	state, _ := vals[2].(string)
	var v session.StateVersion
	v.N, _ = strconv.ParseUint(n, 10, 64)
	v.Tie, _ = strconv.ParseUint(tie, 10, 64)
	return []byte(state), v, nil
}

// StaleStates is how many handoff states SetState dropped for a newer
// one in Redis (written out of order, by two replicas or two goroutines).
func (c *Cluster) StaleStates() int64 { return c.staleStates.Load() }

// Revoke ends session sid on every replica: a tombstone until expiry (the
// session's absolute expiry, after which its id does not open anyway),
// and a message to the replicas' OnRevoke callbacks, this one's included.
// The state of the session is deleted with it.
func (c *Cluster) Revoke(ctx context.Context, sid string, expiry time.Time) error {
	ttl := expiry.Sub(c.cfg.Now())
	if ttl <= 0 {
		ttl = time.Millisecond
	}
	return c.call(ctx, func(ctx context.Context) error {
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, c.keys.revoked(sid), "1", ttl)
			p.Del(ctx, c.keys.state(sid))
			p.Publish(ctx, c.keys.revokeChannel(), sid)
			return nil
		})
		return err
	})
}

// Revoked reports whether session sid was revoked. A replica asks only
// when it is about to resume a session it does not hold.
func (c *Cluster) Revoked(ctx context.Context, sid string) (bool, error) {
	var n int64
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		n, err = c.rdb.Exists(ctx, c.keys.revoked(sid)).Result()
		return err
	})
	return n > 0, err
}
