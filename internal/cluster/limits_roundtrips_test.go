package cluster

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The cost of the shared limits in Redis round trips: none for a POST
// that takes nothing there, one for one that does.

// TestNoRoundTripWithoutLimits: a POST that no shared limit counts costs
// no Redis command; one that does costs exactly one (EVALSHA, once the
// script is loaded).
func TestNoRoundTripWithoutLimits(t *testing.T) {
	m := miniredis.RunT(t)
	c, _ := newCluster(t, "a", m.Addr(), nil)
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []jsonrpc.Message{msg}
	var trips roundTrips
	c.rdb.AddHook(&trips)
	none := limits.New(&limits.Config{MaxInFlightTotal: 10, MaxSessions: 5, Shared: c})
	before := trips.n.Load()
	for range 10 {
		release, ref := none.AdmitRequest("p", msgs)
		if ref != nil {
			t.Fatal(ref.Msg)
		}
		release()
	}
	if n := trips.n.Load() - before; n != 0 {
		t.Errorf("%d Redis commands for 10 POSTs without per-principal limits, want 0", n)
	}
	some := limits.New(&limits.Config{RequestsPerSecond: 1000, ToolsPerSecond: 1000, Shared: c})
	if _, ref := some.AdmitRequest("p", msgs); ref != nil { // loads the script
		t.Fatal(ref.Msg)
	}
	before = trips.n.Load()
	for range 10 {
		if _, ref := some.AdmitRequest("p", msgs); ref != nil {
			t.Fatal(ref.Msg)
		}
	}
	if n := trips.n.Load() - before; n != 10 {
		t.Errorf("%d Redis round trips for 10 POSTs with a rate and a tool rate, want 10", n)
	}
	if cmds := trips.names(); len(cmds) == 0 || cmds[len(cmds)-1] != "evalsha" {
		t.Errorf("commands sent: %v, want EVALSHA last", cmds)
	}
}

// roundTrips is a client hook counting the commands (and pipelines) sent
// to Redis: each is one round trip.
type roundTrips struct {
	n    atomic.Int64
	mu   sync.Mutex
	sent []string
}

func (r *roundTrips) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		r.mu.Lock()
		r.sent = append(r.sent, cmd.Name())
		r.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// BenchmarkAdmitShared is one POST with a shared rate: one round trip to a
// real redis-server on loopback.
func BenchmarkAdmitShared(b *testing.B) {
	addr := testkit.Redis(b)
	c, err := New(Config{Instance: "a", RedisURL: "redis://" + addr, Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	l := limits.New(&limits.Config{RequestsPerSecond: math.MaxInt32, Shared: c})
	benchAdmit(b, l, c)
}

// BenchmarkAdmitNoLimits is the same POST with no per-principal limit:
// no round trip.
func BenchmarkAdmitNoLimits(b *testing.B) {
	addr := testkit.Redis(b)
	c, err := New(Config{Instance: "a", RedisURL: "redis://" + addr, Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	l := limits.New(&limits.Config{MaxInFlightTotal: math.MaxInt32, Shared: c})
	benchAdmit(b, l, c)
}

func benchAdmit(b *testing.B, l *limits.Limiter, c *Cluster) {
	for b.Loop() {
		release, ref := l.AdmitRequest("p", nil)
		if ref != nil {
			b.Fatal(ref.Msg)
		}
		release()
	}
	if c.Down() {
		b.Fatal("Redis went down during the benchmark")
	}
}
