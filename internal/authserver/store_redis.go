package authserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisStore is a Store in gateway.cluster's Redis, shared by every
// replica: a client registered on one, a code issued on one and a grant
// made on one are seen by all. Records that expire carry their TTL in
// Redis (requests, codes, grants and their refresh indexes, cached client
// metadata documents); what must happen once across replicas runs as one
// Lua script (store_redis_scripts.go). All keys start with the hash tag
// redisPrefix, so one Redis Cluster slot holds them all and the scripts
// may touch any of them.
//
// Revoked is on the path of every request with one of our tokens, so it
// never asks Redis: the revoked grants are loaded at start and on every
// (re)subscription, and kept current by a pub/sub channel the revoking
// script publishes on (store_redis_revoked.go).
//
// Every call is bounded by the client's timeout (gateway.cluster's: the
// cluster package sets dial, read, write and pool waits, no retries), on
// top of the caller's ctx, and fails with ErrUnavailable when Redis does
// not answer. As in the cluster package, one such failure marks Redis
// down: calls then fail at once for retryDown, after which one tries it
// again (the revocation watch too, in the background).
//
// Locking: rmu guards the revoked map only, never held during I/O. The
// subscriber goroutine (watchRevoked) is owned by the store: Close stops
// it and waits.
type redisStore struct {
	// Static after openRedisStore.
	rdb        redis.UniversalClient
	now        func() time.Time
	timeout    time.Duration
	revokedFor time.Duration
	stop       context.CancelFunc
	done       chan struct{} // closed when watchRevoked returns

	// downUntil is zero while Redis answers; after a call failed for
	// want of it, the time (Unix ns, real clock) until which calls fail
	// at once. The first call after it tries Redis again.
	downUntil atomic.Int64

	rmu       sync.Mutex           // guards the fields below
	revoked   map[string]time.Time // grant id -> until when
	loaded    bool                 // the whole set was read once
	nextSweep time.Time
}

// redisPrefix starts every key and the revocation channel: the hash tag
// {mcpgate:as} keeps them in one slot.
const redisPrefix = "{mcpgate:as}:"

// defaultRedisTimeout bounds a call when the client says nothing.
const defaultRedisTimeout = time.Second

// revokedChannel carries "grant-id until-ms" for each revocation.
const revokedChannel = redisPrefix + "revoked"

// openRedisStore loads the revoked grants (failing when Redis does not
// answer) and starts the subscriber, which lives until ctx ends or Close.
func openRedisStore(ctx context.Context, rdb redis.UniversalClient, now func() time.Time, revokedFor time.Duration) (*redisStore, error) {
	s := &redisStore{rdb: rdb, now: now, timeout: defaultRedisTimeout, revokedFor: revokedFor, revoked: map[string]time.Time{}}
	if o, ok := rdb.(interface{ Options() *redis.Options }); ok && o.Options().ReadTimeout > 0 {
		s.timeout = o.Options().ReadTimeout
	}
	if s.revokedFor <= 0 {
		// The set of revocations needs a life (a PEXPIRE of 0 deletes
		// it); a token that lives no time needs none remembered.
		s.revokedFor = time.Millisecond
	}
	// Subscribed before the load: a revocation between the two is then
	// in one or the other.
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	ps := rdb.Subscribe(sctx, revokedChannel)
	cancel()
	// Redis out of reach at start (down, or too slow to answer) is not
	// fatal: the gateway serves what needs no Store, this Store's calls
	// fail with ErrUnavailable until Redis answers, and Revoked refuses
	// every grant until the watch below has loaded the set.
	if err := s.loadRevoked(ctx); err != nil && !errors.Is(err, ErrUnavailable) {
		_ = ps.Close()
		return nil, err
	}
	wctx, stop := context.WithCancel(ctx)
	s.stop, s.done = stop, make(chan struct{})
	// A receive blocks in a read that only closing ps ends.
	context.AfterFunc(wctx, func() { _ = ps.Close() })
	go func() {
		defer close(s.done)
		s.watchRevoked(wctx, ps)
	}()
	return s, nil
}

func (s *redisStore) Close() error {
	s.stop()
	<-s.done
	return nil
}

// retryDown is how long calls fail at once after one failed for want of
// Redis; then one is let through to see whether it is back.
const retryDown = time.Second

// call runs fn bounded by the store's timeout, unless Redis was found
// down less than retryDown ago: then it fails at once (ErrUnavailable).
func (s *redisStore) call(ctx context.Context, fn func(ctx context.Context) error) error {
	if until := s.downUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		return fmt.Errorf("%w: redis did not answer a call just before", ErrUnavailable)
	}
	return s.try(ctx, fn)
}

// try is call without the down check, mapping redis.Nil to ErrNotFound.
// A failure to reach Redis (unreached) is ErrUnavailable and marks Redis
// down, unless the caller gave up first; any answer marks it up, and an
// answer that is an error (a script's, LOADING) or a record that does
// not decode is returned as it is.
func (s *redisStore) try(parent context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	defer cancel()
	err := fn(ctx)
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrReused):
		s.downUntil.Store(0)
		return err
	case errors.Is(err, redis.Nil):
		s.downUntil.Store(0)
		return ErrNotFound
	case !unreached(err):
		return fmt.Errorf("authserver: redis: %w", err)
	case parent.Err() == nil:
		s.downUntil.Store(time.Now().Add(retryDown).UnixNano())
	}
	return fmt.Errorf("%w: redis: %w", ErrUnavailable, err)
}

// unreached reports whether err says Redis could not be reached or did
// not answer in time (a dial refused, a timeout, a connection closed or
// none free in the pool), as opposed to an answer.
func unreached(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}

func hexHash(h Hash) string { return hex.EncodeToString(h[:]) }

// ttlUntil is the TTL of a record that expires at t: at least 1 ms (a
// PX of 0 is an error).
func (s *redisStore) ttlUntil(t time.Time) time.Duration {
	return max(t.Sub(s.now()), time.Millisecond)
}

// revokeArgs are the four arguments every script that may revoke starts
// with (store_redis_scripts.go).
func (s *redisStore) revokeArgs() []any {
	now := s.now()
	return []any{redisPrefix, now.UnixMilli(), now.Add(s.revokedFor).UnixMilli(), s.revokedFor.Milliseconds() + 1}
}

func (s *redisStore) PutClient(ctx context.Context, c *Client) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	var ttl time.Duration // none: a registered client stays
	if !c.Expires.IsZero() {
		ttl = s.ttlUntil(c.Expires)
	}
	return s.call(ctx, func(ctx context.Context) error {
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, redisPrefix+"client:"+c.ID, data, ttl)
			p.SAdd(ctx, redisPrefix+"clients", c.ID)
			return nil
		})
		return err
	})
}

func (s *redisStore) Client(ctx context.Context, id string) (*Client, error) {
	var c Client
	if err := s.getJSON(ctx, redisPrefix+"client:"+id, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// getJSON reads the record at key into v; ErrNotFound when there is none.
func (s *redisStore) getJSON(ctx context.Context, key string, v any) error {
	return s.call(ctx, func(ctx context.Context) error {
		data, err := s.rdb.Get(ctx, key).Bytes()
		if err != nil {
			return err
		}
		return json.Unmarshal(data, v)
	})
}

func (s *redisStore) Clients(ctx context.Context) ([]*Client, error) {
	var out []*Client
	err := s.call(ctx, func(ctx context.Context) error {
		ids, err := s.rdb.SMembers(ctx, redisPrefix+"clients").Result()
		if err != nil || len(ids) == 0 {
			return err
		}
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = redisPrefix + "client:" + id
		}
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return err
		}
		var gone []any
		for i, v := range vals {
			str, ok := v.(string)
			if !ok {
				gone = append(gone, ids[i]) // a document's cache that expired
				continue
			}
			var c Client
			if err := json.Unmarshal([]byte(str), &c); err != nil {
				return fmt.Errorf("client %q: %w", ids[i], err)
			}
			out = append(out, &c)
		}
		if len(gone) > 0 {
			return s.rdb.SRem(ctx, redisPrefix+"clients", gone...).Err()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *Client) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (s *redisStore) DeleteClient(ctx context.Context, id string) error {
	args := s.revokeArgs()
	return s.call(ctx, func(ctx context.Context) error {
		gids, err := deleteClientScript.Run(ctx, s.rdb, []string{redisPrefix + "client:" + id}, append(args, id)...).StringSlice()
		for _, gid := range gids {
			s.noteRevoked(gid, time.UnixMilli(args[2].(int64)))
		}
		return err
	})
}

func (s *redisStore) PutAuthRequest(ctx context.Context, r *AuthRequest, ttl time.Duration) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.call(ctx, func(ctx context.Context) error {
		return s.rdb.Set(ctx, redisPrefix+"req:"+r.ID, data, max(ttl, time.Millisecond)).Err()
	})
}

func (s *redisStore) AuthRequest(ctx context.Context, id string) (*AuthRequest, error) {
	var r AuthRequest
	if err := s.getJSON(ctx, redisPrefix+"req:"+id, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *redisStore) DeleteAuthRequest(ctx context.Context, id string) error {
	return s.call(ctx, func(ctx context.Context) error {
		return s.rdb.Del(ctx, redisPrefix+"req:"+id).Err()
	})
}

func (s *redisStore) PutCode(ctx context.Context, code Hash, requestID string, ttl time.Duration) error {
	key := redisPrefix + "code:" + hexHash(code)
	return s.call(ctx, func(ctx context.Context) error {
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			p.HSet(ctx, key, "request", requestID, "taken", "0")
			p.PExpire(ctx, key, max(ttl, time.Millisecond))
			return nil
		})
		return err
	})
}

func (s *redisStore) TakeCode(ctx context.Context, code Hash) (string, error) {
	var id string
	args := s.revokeArgs()
	err := s.call(ctx, func(ctx context.Context) error {
		res, err := takeCodeScript.Run(ctx, s.rdb, []string{redisPrefix + "code:" + hexHash(code)}, args...).StringSlice()
		if err != nil {
			return err
		}
		switch res[0] {
		case "ok":
			id = res[1]
			return nil
		case "reused":
			if res[1] != "" {
				s.noteRevoked(res[1], time.UnixMilli(args[2].(int64)))
			}
			return ErrReused
		}
		return ErrNotFound
	})
	return id, err
}

func (s *redisStore) CodeGrant(ctx context.Context, code Hash, grantID string) error {
	args := s.revokeArgs()
	return s.call(ctx, func(ctx context.Context) error {
		n, err := codeGrantScript.Run(ctx, s.rdb, []string{redisPrefix + "code:" + hexHash(code)}, append(args, grantID)...).Int()
		switch {
		case err != nil:
			return err
		case n == 0:
			return ErrNotFound
		case n < 0:
			s.noteRevoked(grantID, time.UnixMilli(args[2].(int64)))
			return ErrReused
		}
		return nil
	})
}

func (s *redisStore) Seed(ctx context.Context) ([]byte, error) {
	var seed []byte
	err := s.call(ctx, func(ctx context.Context) error {
		fresh := make([]byte, 32)
		_, _ = rand.Read(fresh) // never fails (crypto/rand)
		// The first replica to ask makes it; every other reads that one.
		if err := s.rdb.SetNX(ctx, redisPrefix+"seed", fresh, 0).Err(); err != nil {
			return err
		}
		var err error
		seed, err = s.rdb.Get(ctx, redisPrefix+"seed").Bytes()
		if err == nil && len(seed) != 32 {
			err = fmt.Errorf("the seed in Redis is %d bytes, want 32", len(seed))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return seed, nil
}

func (s *redisStore) PutPasskey(ctx context.Context, p *Passkey) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.call(ctx, func(ctx context.Context) error {
		return s.rdb.RPush(ctx, redisPrefix+"passkeys:"+p.User, data).Err()
	})
}

func (s *redisStore) Passkeys(ctx context.Context, user string) ([]*Passkey, error) {
	var out []*Passkey
	err := s.call(ctx, func(ctx context.Context) error {
		list, err := s.rdb.LRange(ctx, redisPrefix+"passkeys:"+user, 0, -1).Result()
		if err != nil {
			return err
		}
		for _, v := range list {
			var p Passkey
			if err := json.Unmarshal([]byte(v), &p); err != nil {
				return fmt.Errorf("passkey of %q: %w", user, err)
			}
			out = append(out, &p)
		}
		return nil
	})
	return out, err
}

var _ Store = (*redisStore)(nil)
