package authserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// top of the caller's ctx; a Redis that is down fails a call with its
// error, at once or after that timeout, never later.
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

	rmu       sync.Mutex           // guards the fields below
	revoked   map[string]time.Time // grant id -> until when
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
	if err := s.loadRevoked(ctx); err != nil {
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

// call runs fn bounded by the store's timeout, mapping redis.Nil to
// ErrNotFound and wrapping the rest.
func (s *redisStore) call(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := fn(ctx)
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrReused):
		return err
	case errors.Is(err, redis.Nil):
		return ErrNotFound
	}
	return fmt.Errorf("authserver: redis: %w", err)
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
	return s.call(ctx, func(ctx context.Context) error {
		args := append(s.revokeArgs(), id)
		return deleteClientScript.Run(ctx, s.rdb, []string{redisPrefix + "client:" + id}, args...).Err()
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
	return s.call(ctx, func(ctx context.Context) error {
		n, err := codeGrantScript.Run(ctx, s.rdb, []string{redisPrefix + "code:" + hexHash(code)}, grantID).Int()
		if err == nil && n == 0 {
			return ErrNotFound
		}
		return err
	})
}

// joinHashes is a grant's replaced hashes as its Redis hash keeps them.
func joinHashes(hs []Hash) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = hexHash(h)
	}
	return strings.Join(parts, " ")
}

func (s *redisStore) PutGrant(ctx context.Context, g *Grant) error {
	data, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return s.call(ctx, func(ctx context.Context) error {
		args := append(s.revokeArgs(), g.ID, data, g.ClientID, hexHash(g.Refresh), g.Expires.UnixMilli(),
			g.LastUsed.UnixMilli(), joinHashes(g.Previous), s.ttlUntil(g.Expires).Milliseconds())
		res, err := putGrantScript.Run(ctx, s.rdb, []string{redisPrefix + "grant:" + g.ID}, args...).Text()
		if err == nil && res == "revoked" {
			return ErrNotFound
		}
		return err
	})
}

// grantOf decodes a grant's Redis hash: its JSON, with the fields the
// scripts change (refresh, expires, lastUsed, previous) taken from their
// own fields.
func grantOf(f map[string]string) (*Grant, error) {
	var g Grant
	if err := json.Unmarshal([]byte(f["json"]), &g); err != nil {
		return nil, fmt.Errorf("grant: %w", err)
	}
	var err error
	if g.Refresh, err = parseHexHash(f["refresh"]); err != nil {
		return nil, err
	}
	g.Previous = nil
	for h := range strings.FieldsSeq(f["previous"]) {
		p, err := parseHexHash(h)
		if err != nil {
			return nil, err
		}
		g.Previous = append(g.Previous, p)
	}
	exp, err1 := strconv.ParseInt(f["expires"], 10, 64)
	used, err2 := strconv.ParseInt(f["lastUsed"], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("grant %s: %w", g.ID, err)
	}
	g.Expires, g.LastUsed = time.UnixMilli(exp), time.UnixMilli(used)
	return &g, nil
}

func parseHexHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("not a hash: %q", s)
	}
	copy(h[:], b)
	return h, nil
}

func (s *redisStore) Grant(ctx context.Context, id string) (*Grant, error) {
	var g *Grant
	err := s.call(ctx, func(ctx context.Context) error {
		f, err := s.rdb.HGetAll(ctx, redisPrefix+"grant:"+id).Result()
		if err != nil {
			return err
		}
		if len(f) == 0 {
			return ErrNotFound
		}
		g, err = grantOf(f)
		return err
	})
	return g, err
}

func (s *redisStore) Grants(ctx context.Context) ([]*Grant, error) {
	var out []*Grant
	err := s.call(ctx, func(ctx context.Context) error {
		ids, err := s.rdb.SMembers(ctx, redisPrefix+"grants").Result()
		if err != nil || len(ids) == 0 {
			return err
		}
		cmds := make([]*redis.MapStringStringCmd, len(ids))
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HGetAll(ctx, redisPrefix+"grant:"+id)
			}
			return nil
		}); err != nil {
			return err
		}
		var gone []any
		for i, c := range cmds {
			if len(c.Val()) == 0 {
				gone = append(gone, ids[i]) // expired unused
				continue
			}
			g, err := grantOf(c.Val())
			if err != nil {
				return err
			}
			out = append(out, g)
		}
		if len(gone) > 0 {
			return s.rdb.SRem(ctx, redisPrefix+"grants", gone...).Err()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *Grant) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (s *redisStore) RevokeGrant(ctx context.Context, id string) error {
	args := s.revokeArgs()
	err := s.call(ctx, func(ctx context.Context) error {
		return revokeScript.Run(ctx, s.rdb, nil, append(args, id)...).Err()
	})
	if err == nil {
		// This replica knows at once; the others by the channel.
		s.noteRevoked(id, time.UnixMilli(args[2].(int64)))
	}
	return err
}

func (s *redisStore) Rotate(ctx context.Context, old, next Hash, expires time.Time) (*Grant, error) {
	var g *Grant
	err := s.call(ctx, func(ctx context.Context) error {
		o := hexHash(old)
		keys := []string{redisPrefix + "refresh:" + o, redisPrefix + "prev:" + o}
		args := append(s.revokeArgs(), o, hexHash(next), expires.UnixMilli(), s.ttlUntil(expires).Milliseconds(), maxPrevious)
		res, err := rotateScript.Run(ctx, s.rdb, keys, args...).Slice()
		if err != nil {
			return err
		}
		switch res[0] {
		case "reused":
			if gid, ok := res[1].(string); ok {
				s.noteRevoked(gid, time.UnixMilli(args[2].(int64)))
			}
			return ErrReused
		case "ok":
		default:
			return ErrNotFound
		}
		flat, _ := res[1].([]any)
		f := make(map[string]string, len(flat)/2)
		for i := 0; i+1 < len(flat); i += 2 {
			k, _ := flat[i].(string)
			v, _ := flat[i+1].(string)
			f[k] = v
		}
		g, err = grantOf(f)
		return err
	})
	return g, err
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
