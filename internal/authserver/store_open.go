package authserver

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/config"
)

// STUB (the lead's skeleton): helper "store" replaces this file.

// OpenStore opens the Store the gateway's config asks for: Redis when
// rdb is not nil (gateway.cluster's Redis: several replicas share the
// records), else memory written to cfg.StateFile (resolved against
// configDir when relative). revokedFor is the access token TTL: how long
// a revoked grant must be remembered.
func OpenStore(ctx context.Context, cfg config.AuthServer, configDir string, rdb redis.UniversalClient, now func() time.Time) (Store, error) {
	return newMemStore(now, cfg.AccessTokenTTL), nil
}
