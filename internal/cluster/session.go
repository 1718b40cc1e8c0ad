package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file holds what Redis keeps of sessions: the newest handoff state of
// a portable session, and revocations (a tombstone every replica can ask
// for, and a message every replica hears).

// SetState stores state as the newest handoff state of session sid, until
// expiry (the session's absolute expiry).
func (c *Cluster) SetState(ctx context.Context, sid string, state []byte, expiry time.Time) error {
	ttl := expiry.Sub(c.cfg.Now())
	if ttl <= 0 {
		return nil
	}
	return c.call(ctx, func(ctx context.Context) error {
		return c.rdb.Set(ctx, c.keys.state(sid), state, ttl).Err()
	})
}

// State returns the newest handoff state of session sid; nil (and no
// error) when Redis has none.
func (c *Cluster) State(ctx context.Context, sid string) ([]byte, error) {
	var state []byte
	err := c.call(ctx, func(ctx context.Context) error {
		b, err := c.rdb.Get(ctx, c.keys.state(sid)).Bytes()
		state = b
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return state, err
}

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

// OnRevoke registers fn to be called with the id of every session revoked
// by any replica while Run runs. fn runs on Run's subscriber goroutine,
// one call at a time, and must not block.
func (c *Cluster) OnRevoke(fn func(sid string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onRevoke = append(c.onRevoke, fn)
}

// subscribe hands revocations to the OnRevoke callbacks until ctx ends.
// The client's subscription reconnects by itself after Redis comes back;
// revocations published meanwhile are missed (the tombstone still refuses
// a resume).
func (c *Cluster) subscribe(ctx context.Context) {
	ps := c.rdb.Subscribe(ctx, c.keys.revokeChannel())
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			c.mu.Lock()
			fns := c.onRevoke
			c.mu.Unlock()
			for _, fn := range fns {
				fn(msg.Payload)
			}
		}
	}
}
