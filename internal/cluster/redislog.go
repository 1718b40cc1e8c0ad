package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// quietRedis sends the client library's own log lines (one per failed dial
// or reconnect, so one a heartbeat while Redis is down) to slog at debug
// level: the Cluster logs the transitions that matter, once each.
type quietRedis struct{}

func (quietRedis) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, "cluster: redis client: "+fmt.Sprintf(format, v...))
}

// quietOnce sets the library's logger, which is process-wide, once.
var quietOnce sync.Once

func quietRedisLogs() { quietOnce.Do(func() { redis.SetLogger(quietRedis{}) }) }
