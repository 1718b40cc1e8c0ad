package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newClock is the fake clock Clusters of a test share.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC))
}

// newCluster returns a Cluster on the Redis at addr ("" none), closed at
// cleanup; its logs go to the returned buffer.
func newCluster(t *testing.T, instance, addr string, clk *testkit.Clock) (*Cluster, *testkit.SyncBuffer) {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	cfg := Config{
		Instance:  instance,
		Advertise: instance + ".test:8080",
		Heartbeat: time.Second,
		// Far beyond any call on a busy machine, so that only a real
		// block reaches it; TestCallsBoundedByTimeout sets its own.
		Timeout: 5 * time.Second,
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
	}
	if addr != "" {
		cfg.RedisURL = "redis://" + addr + "/0"
	}
	if clk != nil {
		cfg.Now = clk.Now
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, logs
}

// run runs c until the test ends, and waits for Run to return.
func run(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		testkit.Receive(t, done, "Run to return")
	})
}

// TestWithoutRedis: a Cluster without a Redis URL knows only itself, and
// every Redis call fails at once.
func TestWithoutRedis(t *testing.T) {
	c, _ := newCluster(t, "solo", "", nil)
	run(t, c)
	if n := c.Live(); n != 1 {
		t.Errorf("Live() = %d, want 1", n)
	}
	if alive, known := c.Alive("solo"); !alive || !known {
		t.Errorf("Alive(self) = %v, %v; want true, true", alive, known)
	}
	if alive, known := c.Alive("other"); alive || known {
		t.Errorf("Alive(other) = %v, %v; want false, false", alive, known)
	}
	ctx := context.Background()
	if _, err := c.Admit(ctx, limits.SharedRequest{Principal: "p", Now: time.Now(), Rates: []limits.Rate{{PerSecond: 1, Burst: 1}}}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Admit: %v, want ErrUnavailable", err)
	}
	if _, _, err := c.State(ctx, "sid"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("State: %v, want ErrUnavailable", err)
	}
	if err := c.Beat(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Beat: %v, want ErrUnavailable", err)
	}
	c.Release("p", limits.Slot, 1) // must not block nor panic
	if !c.Down() {
		t.Error("Down() is false without Redis")
	}
}

// TestDefaultInstance: an instance id is made when none is given, and two
// Clusters (two process lives) get different ones.
func TestDefaultInstance(t *testing.T) {
	a, _ := newCluster(t, "", "", nil)
	b, _ := newCluster(t, "", "", nil)
	if a.Instance() == "" || a.Instance() == b.Instance() {
		t.Errorf("instances %q and %q: want two different non-empty ids", a.Instance(), b.Instance())
	}
}

// TestBadURL: a URL that is not redis:// fails New.
func TestBadURL(t *testing.T) {
	if _, err := New(Config{RedisURL: "http://localhost:6379"}); err == nil {
		t.Fatal("New accepted an http:// Redis URL")
	}
}

// TestDownAndBackLoggedOnce: with Redis stopped, many calls log one line;
// the first heartbeat that reaches it again logs one more, and calls work.
func TestDownAndBackLoggedOnce(t *testing.T) {
	r := testkit.StartRedis(t)
	c, logs := newCluster(t, "a", r.Addr, nil)
	ctx := context.Background()
	if err := c.Beat(ctx); err != nil {
		t.Fatalf("Beat: %v", err)
	}
	r.Stop()
	for i := range 20 {
		if _, _, err := c.State(ctx, "sid"); err == nil {
			t.Fatalf("State %d answered with Redis stopped", i)
		}
	}
	if err := c.Beat(ctx); err == nil {
		t.Fatal("Beat succeeded with Redis stopped")
	}
	if n := strings.Count(logs.String(), "redis unreachable"); n != 1 {
		t.Errorf("%d 'unreachable' lines for 21 failed calls, want 1:\n%s", n, logs.String())
	}
	if _, _, err := c.State(ctx, "sid"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("State while down: %v, want ErrUnavailable at once", err)
	}
	r.Start()
	if _, _, err := c.State(ctx, "sid"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("State before a heartbeat saw Redis back: %v, want ErrUnavailable", err)
	}
	if err := c.Beat(ctx); err != nil {
		t.Fatalf("Beat after restart: %v", err)
	}
	if c.Down() {
		t.Error("still down after a heartbeat reached Redis")
	}
	if _, _, err := c.State(ctx, "sid"); err != nil {
		t.Errorf("State after Redis is back: %v", err)
	}
	if n := strings.Count(logs.String(), "redis reachable again"); n != 1 {
		t.Errorf("%d 'reachable again' lines, want 1:\n%s", n, logs.String())
	}
}

// blackhole accepts connections and never answers: a Redis that hangs.
// It counts the connections it accepted.
type blackhole struct {
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newBlackhole(t *testing.T) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		b.wg.Wait()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
	})
	return b
}

// TestCallsBoundedByTimeout: against a Redis that never answers, a call
// ends with a timeout (not a hang), and the next ones fail at once without
// touching the network until a heartbeat tries again.
func TestCallsBoundedByTimeout(t *testing.T) {
	b := newBlackhole(t)
	c, err := New(Config{Instance: "a", RedisURL: "redis://" + b.ln.Addr().String(), Timeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := c.Admit(context.Background(), limits.SharedRequest{Principal: "p", Now: time.Now(), Rates: []limits.Rate{{PerSecond: 1, Burst: 1}}})
		done <- err
	}()
	err = testkit.Receive(t, done, "Admit against a hung Redis to return")
	var ne net.Error
	if err == nil || !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Admit against a hung Redis: %v, want a timeout", err)
	}
	seen := b.accepted.Load()
	for range 100 {
		if _, err := c.Admit(context.Background(), limits.SharedRequest{Principal: "p", Now: time.Now(), Rates: []limits.Rate{{PerSecond: 1, Burst: 1}}}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Admit while down: %v, want ErrUnavailable", err)
		}
	}
	if n := b.accepted.Load(); n != seen {
		t.Errorf("calls while down opened %d connections, want none", n-seen)
	}
	if err := c.Beat(context.Background()); err == nil {
		t.Error("Beat answered by a hung Redis")
	}
}

// TestScriptErrorKeepsRedisUp: an error reply about the command (here a
// key of the wrong type) is returned to the caller and does not mark Redis
// down.
func TestScriptErrorKeepsRedisUp(t *testing.T) {
	addr := testkit.Redis(t)
	c, logs := newCluster(t, "a", addr, nil)
	ctx := context.Background()
	if err := c.rdb.LPush(ctx, c.keys.inFlight("p"), "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(ctx, limits.SharedRequest{Principal: "p", Now: time.Now(), MaxInFlight: 1}); err == nil {
		t.Fatal("Admit on a counter of the wrong type succeeded")
	}
	if c.Down() || strings.Contains(logs.String(), "unreachable") {
		t.Errorf("an error reply marked Redis down:\n%s", logs.String())
	}
}
