package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestState: the newest state wins, a session without one has none, and
// the state lives until the session's expiry (miniredis's clock).
func TestState(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newClock()
	m.SetTime(clk.Now())
	a, _ := newCluster(t, "a", m.Addr(), clk)
	b, _ := newCluster(t, "b", m.Addr(), clk)
	ctx := context.Background()
	expiry := clk.Now().Add(time.Hour)
	if st, err := b.State(ctx, "s1"); err != nil || st != nil {
		t.Fatalf("State of an unknown session = %q, %v; want nil, nil", st, err)
	}
	for _, st := range []string{"v1", "v2"} {
		if err := a.SetState(ctx, "s1", []byte(st), expiry); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := b.State(ctx, "s1"); err != nil || string(st) != "v2" {
		t.Fatalf("State = %q, %v; want v2", st, err)
	}
	m.FastForward(time.Hour)
	if st, err := b.State(ctx, "s1"); err != nil || st != nil {
		t.Fatalf("State after the session's expiry = %q, %v; want nil, nil", st, err)
	}
	if err := a.SetState(ctx, "s2", []byte("late"), clk.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.State(ctx, "s2"); st != nil {
		t.Errorf("a state stored past its session's expiry: %q", st)
	}
}

// TestRevokeReachesOtherReplica: a session revoked on one replica is
// handed to the OnRevoke callback of another (real pub/sub), its tombstone
// answers Revoked there, and its state is gone.
func TestRevokeReachesOtherReplica(t *testing.T) {
	addr := testkit.Redis(t)
	a, _ := newCluster(t, "a", addr, nil)
	b, _ := newCluster(t, "b", addr, nil)
	got := make(chan string, 4)
	b.OnRevoke(func(sid string) { got <- sid })
	run(t, a)
	run(t, b)
	ctx := context.Background()

	// A message published before b subscribes is lost, by design of
	// pub/sub: wait until both replicas listen.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	testkit.WaitFor(t, "both replicas to subscribe", func() bool {
		n, err := rdb.PubSubNumSub(ctx, a.keys.revokeChannel()).Result()
		return err == nil && n[a.keys.revokeChannel()] == 2
	})

	expiry := time.Now().Add(time.Hour)
	if err := a.SetState(ctx, "sid-1", []byte("state"), expiry); err != nil {
		t.Fatal(err)
	}
	if revoked, err := b.Revoked(ctx, "sid-1"); err != nil || revoked {
		t.Fatalf("Revoked before Revoke = %v, %v", revoked, err)
	}
	if err := a.Revoke(ctx, "sid-1", expiry); err != nil {
		t.Fatal(err)
	}
	if sid := testkit.Receive(t, got, "b's OnRevoke"); sid != "sid-1" {
		t.Errorf("b's OnRevoke got %q, want sid-1", sid)
	}
	if revoked, err := b.Revoked(ctx, "sid-1"); err != nil || !revoked {
		t.Errorf("b.Revoked(sid-1) = %v, %v; want true", revoked, err)
	}
	if revoked, _ := b.Revoked(ctx, "sid-2"); revoked {
		t.Error("a session never revoked reads as revoked")
	}
	if st, err := b.State(ctx, "sid-1"); err != nil || st != nil {
		t.Errorf("state of a revoked session = %q, %v; want none", st, err)
	}
}

// TestRevokeAfterRedisRestart: the subscription comes back by itself after
// Redis was stopped and started.
func TestRevokeAfterRedisRestart(t *testing.T) {
	r := testkit.StartRedis(t)
	a, _ := newCluster(t, "a", r.Addr, nil)
	b, _ := newCluster(t, "b", r.Addr, nil)
	got := make(chan string, 4)
	b.OnRevoke(func(sid string) { got <- sid })
	run(t, a)
	run(t, b)
	ctx := context.Background()
	subscribed := func() bool {
		rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
		defer rdb.Close()
		n, err := rdb.PubSubNumSub(ctx, b.keys.revokeChannel()).Result()
		return err == nil && n[b.keys.revokeChannel()] == 2
	}
	testkit.WaitFor(t, "both replicas to subscribe", subscribed)
	r.Stop()
	r.Start()
	testkit.WaitFor(t, "both replicas to subscribe again", subscribed)
	testkit.WaitFor(t, "a heartbeat to see Redis back", func() bool { return !a.Down() })
	if err := a.Revoke(ctx, "sid-3", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if sid := testkit.Receive(t, got, "b's OnRevoke after the restart"); sid != "sid-3" {
		t.Errorf("b's OnRevoke got %q, want sid-3", sid)
	}
}

// TestRunStartsWithRedisDown: a replica started while Redis is stopped
// beats, subscribes and hears revocations once Redis starts.
func TestRunStartsWithRedisDown(t *testing.T) {
	r := testkit.StartRedis(t)
	r.Stop()
	a, _ := newCluster(t, "a", r.Addr, nil)
	got := make(chan string, 4)
	a.OnRevoke(func(sid string) { got <- sid })
	run(t, a)
	testkit.WaitFor(t, "the first heartbeat to fail", a.Down)
	r.Start()
	testkit.WaitFor(t, "a heartbeat to reach Redis", func() bool { return !a.Down() })
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	ctx := context.Background()
	testkit.WaitFor(t, "the replica to subscribe", func() bool {
		n, err := rdb.PubSubNumSub(ctx, a.keys.revokeChannel()).Result()
		return err == nil && n[a.keys.revokeChannel()] == 1
	})
	if err := a.Revoke(ctx, "sid-4", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if sid := testkit.Receive(t, got, "OnRevoke"); sid != "sid-4" {
		t.Errorf("OnRevoke got %q, want sid-4", sid)
	}
}
