package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// stateEvent is one OnStateChange call.
type stateEvent struct {
	sid string
	v   session.StateVersion
}

// TestStateChangeReachesOtherReplica: a state stored by one replica is
// told to another's OnStateChange (real pub/sub) with its session and
// version; a state that lost to a newer one is told to nobody.
func TestStateChangeReachesOtherReplica(t *testing.T) {
	addr := testkit.Redis(t)
	a, _ := newCluster(t, "a", addr, nil)
	b, _ := newCluster(t, "b", addr, nil)
	got := make(chan stateEvent, 8)
	b.OnStateChange(func(sid string, v session.StateVersion) { got <- stateEvent{sid, v} })
	subscribed := make(chan struct{}, 8)
	b.OnSubscribed(func() { subscribed <- struct{}{} })
	run(t, a)
	run(t, b)
	testkit.Receive(t, subscribed, "b subscribed")
	ctx := context.Background()
	expiry := time.Now().Add(time.Hour)
	v2 := session.StateVersion{N: 2, Tie: 7}
	for _, v := range []session.StateVersion{v2, {N: 1, Tie: 9}} {
		if _, err := a.SetState(ctx, "sid 1", v, []byte("x"), expiry); err != nil {
			t.Fatal(err)
		}
	}
	if ev := testkit.Receive(t, got, "b's OnStateChange"); ev != (stateEvent{"sid 1", v2}) {
		t.Fatalf("b's OnStateChange got %+v, want sid 1 at %+v", ev, v2)
	}
	v3 := session.StateVersion{N: 3, Tie: 1}
	if _, err := a.SetState(ctx, "sid 1", v3, []byte("y"), expiry); err != nil {
		t.Fatal(err)
	}
	// The stale write in between was told to nobody: the next message is v3's.
	if ev := testkit.Receive(t, got, "b's OnStateChange"); ev != (stateEvent{"sid 1", v3}) {
		t.Fatalf("b's OnStateChange got %+v, want sid 1 at %+v (a stale write announced?)", ev, v3)
	}
}

// TestOnSubscribedAfterRedisRestart: OnSubscribed is called when the
// subscription is first in place, and again once it is back after Redis
// was stopped and started, so a replica can catch up on the state changes
// published while its link was down.
func TestOnSubscribedAfterRedisRestart(t *testing.T) {
	r := testkit.StartRedis(t)
	a, _ := newCluster(t, "a", r.Addr, nil)
	subscribed := make(chan struct{}, 8)
	a.OnSubscribed(func() { subscribed <- struct{}{} })
	run(t, a)
	testkit.Receive(t, subscribed, "the first subscription")
	r.Stop()
	r.Start()
	testkit.Receive(t, subscribed, "the subscription after Redis restarted")
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	n, err := rdb.PubSubNumSub(context.Background(), a.keys.stateChannel()).Result()
	if err != nil || n[a.keys.stateChannel()] != 1 {
		t.Errorf("subscribers of the state channel after the restart: %v, %v; want 1", n, err)
	}
}

// FuzzParseStateChange: any message parses or is refused without a
// panic; one that parses says the same once encoded again.
func FuzzParseStateChange(f *testing.F) {
	f.Add(stateChange("abc.def", session.StateVersion{N: 3, Tie: 1 << 47}))
	f.Add("1 2 ")
	f.Add("18446744073709551616 0 s")
	f.Add("1  s")
	f.Fuzz(func(t *testing.T, msg string) {
		sid, v, ok := parseStateChange(msg)
		if !ok {
			return
		}
		sid2, v2, ok2 := parseStateChange(stateChange(sid, v))
		if !ok2 || sid2 != sid || v2 != v {
			t.Fatalf("%q -> %q %+v -> %q %+v %v", msg, sid, v, sid2, v2, ok2)
		}
	})
}
