package authserver

import (
	"context"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/config"
)

// OpenStore opens the Store the gateway's config asks for: Redis when
// rdb is not nil (gateway.cluster's Redis: several replicas share the
// records), else memory written to cfg.StateFile (resolved against
// configDir when relative). revokedFor is the access token TTL: how long
// a revoked grant must be remembered.
//
// A Redis Store loads the revoked grants and subscribes to new
// revocations until ctx ends or Close is called; Redis out of reach at
// start is no error (the Store's calls fail with ErrUnavailable, and
// every grant counts as revoked, until Redis answers). A file Store fails when
// the state file exists but cannot be read or trusted (the error names
// the file and what is wrong). Without a state file name (tests), the
// records live in memory only.
func OpenStore(ctx context.Context, cfg config.AuthServer, configDir string, rdb redis.UniversalClient, now func() time.Time) (Store, error) {
	if now == nil {
		now = time.Now
	}
	if rdb != nil {
		return openRedisStore(ctx, rdb, now, cfg.AccessTokenTTL)
	}
	if cfg.StateFile == "" {
		return newMemStore(now, cfg.AccessTokenTTL), nil
	}
	path := cfg.StateFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(configDir, path)
	}
	return openFileStore(path, now, cfg.AccessTokenTTL)
}
