package authserver

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis store's memory of revoked grants: Revoked answers from it
// alone. It learns of revocations three ways: its own (at once), the
// channel every revoking script publishes on (the others'), and a load
// of the whole set at start and on every (re)subscription, so that what
// was published while this replica was cut off from Redis is not missed.

// resubscribeWait is how long watchRevoked waits after the subscription
// failed before trying again (the client library reconnects on the next
// receive): long enough not to spin while Redis is down.
const resubscribeWait = time.Second

// resyncEvery is how often watchRevoked loads the whole set even when
// the channel is quiet: a message lost in a way the subscription did not
// notice is repaired within it.
const resyncEvery = 30 * time.Second

// Revoked answers true for every grant until the set has been loaded
// once: a replica that started while Redis was down cannot know which
// grants were revoked before, and refuses their access tokens (only on
// it, only until Redis answers) rather than accept a revoked one.
func (s *redisStore) Revoked(id string) bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if !s.loaded {
		return true
	}
	until, ok := s.revoked[id]
	return ok && s.now().Before(until)
}

// noteRevoked remembers grant id as revoked until until.
func (s *redisStore) noteRevoked(id string, until time.Time) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.sweepRevokedLocked()
	if until.After(s.revoked[id]) {
		s.revoked[id] = until
	}
}

// sweepRevokedLocked forgets the revocations that no longer matter, at
// most once every sweepEvery.
func (s *redisStore) sweepRevokedLocked() {
	now := s.now()
	if now.Before(s.nextSweep) {
		return
	}
	s.nextSweep = now.Add(sweepEvery)
	forgetPast(s.revoked, now)
}

// loadRevoked reads the revoked set, adding what this replica did not
// know. It asks Redis even when it is marked down: the watch finds it
// back as soon as its subscription does.
func (s *redisStore) loadRevoked(ctx context.Context) error {
	var list []redis.Z
	err := s.try(ctx, func(ctx context.Context) error {
		var err error
		list, err = s.rdb.ZRangeByScoreWithScores(ctx, redisPrefix+"revoked", &redis.ZRangeBy{
			Min: "(" + strconv.FormatInt(s.now().UnixMilli(), 10), Max: "+inf",
		}).Result()
		return err
	})
	if err != nil {
		return err
	}
	for _, z := range list {
		if id, ok := z.Member.(string); ok {
			s.noteRevoked(id, time.UnixMilli(int64(z.Score)))
		}
	}
	s.rmu.Lock()
	s.loaded = true
	s.rmu.Unlock()
	return nil
}

// parseRevocation reads a message of the revocation channel: "ID UNTIL"
// (Unix ms).
func parseRevocation(payload string) (id string, until time.Time, ok bool) {
	id, ms, found := strings.Cut(payload, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !found || id == "" || err != nil {
		return "", time.Time{}, false
	}
	return id, time.UnixMilli(n), true
}

// watchRevoked receives the revocation channel until ctx ends (which
// closes ps), loading the whole set at every (re)subscription and every
// resyncEvery.
func (s *redisStore) watchRevoked(ctx context.Context, ps *redis.PubSub) {
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, resyncEvery)
		switch m := msg.(type) {
		case *redis.Subscription:
			_ = s.loadRevoked(ctx) // a failure: the next subscription or resync loads
		case *redis.Message:
			if id, until, ok := parseRevocation(m.Payload); ok {
				s.noteRevoked(id, until)
			}
		}
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			_ = s.loadRevoked(ctx)
			continue
		}
		t := time.NewTimer(resubscribeWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
