package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/session"
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
	if st, _, err := b.State(ctx, "s1"); err != nil || st != nil {
		t.Fatalf("State of an unknown session = %q, %v; want nil, nil", st, err)
	}
	for i, st := range []string{"v1", "v2"} {
		if _, err := a.SetState(ctx, "s1", session.StateVersion{N: uint64(i + 1)}, []byte(st), expiry); err != nil {
			t.Fatal(err)
		}
	}
	if st, _, err := b.State(ctx, "s1"); err != nil || string(st) != "v2" {
		t.Fatalf("State = %q, %v; want v2", st, err)
	}
	m.FastForward(time.Hour)
	if st, _, err := b.State(ctx, "s1"); err != nil || st != nil {
		t.Fatalf("State after the session's expiry = %q, %v; want nil, nil", st, err)
	}
	if _, err := a.SetState(ctx, "s2", session.StateVersion{N: 1}, []byte("late"), clk.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := b.State(ctx, "s2"); st != nil {
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
	if _, err := a.SetState(ctx, "sid-1", session.StateVersion{N: 1}, []byte("state"), expiry); err != nil {
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
	if st, _, err := b.State(ctx, "sid-1"); err != nil || st != nil {
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

// TestStateVersions: a state older than the stored one, or as old, loses
// silently (counted), whichever replica writes it; a newer one, by its
// count or by its tie, wins; and State gives the stored version back.
func TestStateVersions(t *testing.T) {
	m := miniredis.RunT(t)
	a, _ := newCluster(t, "a", m.Addr(), nil)
	b, _ := newCluster(t, "b", m.Addr(), nil)
	ctx := context.Background()
	expiry := time.Now().Add(time.Hour)
	steps := []struct {
		by     *Cluster
		v      session.StateVersion
		state  string
		stored bool
	}{
		{a, session.StateVersion{N: 2, Tie: 5}, "a2", true},
		{b, session.StateVersion{N: 1, Tie: 9}, "b1", false},  // older count, higher tie
		{b, session.StateVersion{N: 2, Tie: 5}, "b2=", false}, // as old
		{b, session.StateVersion{N: 2, Tie: 4}, "b2-", false}, // same count, lower tie
		{b, session.StateVersion{N: 2, Tie: 6}, "b2+", true},  // same count, higher tie
		{a, session.StateVersion{N: 3, Tie: 0}, "a3", true},
	}
	for i, s := range steps {
		stored, err := s.by.SetState(ctx, "s", s.v, []byte(s.state), expiry)
		if err != nil || stored != s.stored {
			t.Fatalf("step %d: SetState(%+v, %s) = %v, %v; want %v", i, s.v, s.state, stored, err, s.stored)
		}
	}
	st, v, err := b.State(ctx, "s")
	if err != nil || string(st) != "a3" || v != (session.StateVersion{N: 3, Tie: 0}) {
		t.Fatalf("State = %q %+v, %v; want a3 {3 0}", st, v, err)
	}
	if n := a.StaleStates() + b.StaleStates(); n != 3 {
		t.Errorf("StaleStates = %d, want 3", n)
	}
}

// TestStateConcurrentWriters: two writers (two goroutines of one replica
// and one of another, on a real Redis) storing versions in scrambled
// order end with the highest version stored, whatever order their writes
// reached Redis in.
func TestStateConcurrentWriters(t *testing.T) {
	addr := testkit.Redis(t)
	a, _ := newCluster(t, "a", addr, nil)
	b, _ := newCluster(t, "b", addr, nil)
	ctx := context.Background()
	expiry := time.Now().Add(time.Hour)
	const n = 100
	write := func(c *Cluster, tie uint64, start int, done chan<- error) {
		for i := range n {
			k := uint64((start+i*37)%n + 1) // every count once, out of order
			v := session.StateVersion{N: k, Tie: tie}
			if _, err := c.SetState(ctx, "sid-c", v, []byte(stateChange("sid-c", v)), expiry); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}
	done := make(chan error, 3)
	go write(a, 1, 0, done)
	go write(a, 2, 50, done)
	go write(b, 3, 25, done)
	for range 3 {
		if err := testkit.Receive(t, done, "a writer"); err != nil {
			t.Fatal(err)
		}
	}
	want := session.StateVersion{N: n, Tie: 3}
	st, v, err := a.State(ctx, "sid-c")
	if err != nil || v != want || string(st) != stateChange("sid-c", want) {
		t.Fatalf("State = %q %+v, %v; want the state of %+v", st, v, err, want)
	}
}
