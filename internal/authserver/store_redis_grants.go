package authserver

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis store's grants. A grant is a Redis hash: its JSON as
// PutGrant was given it, and apart from it the fields the scripts change
// (refresh, expires, lastUsed, previous), which win over the JSON's.
// Indexes point from each refresh token's hash, current (refresh:) or
// replaced (prev:), to the grant, and the sets grants and clientgrants:ID
// list them; all of them expire with the grant.

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
