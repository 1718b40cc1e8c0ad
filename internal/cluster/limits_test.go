package cluster

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// admit runs one Admit, failing the test on an error.
func admit(t *testing.T, c *Cluster, req limits.SharedRequest) limits.SharedVerdict {
	t.Helper()
	v, err := c.Admit(context.Background(), req)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return v
}

// TestGCRAScript: the burst is admitted at once, the next request is
// refused with the exact wait until a token is back, and one interval
// later one more is admitted (miniredis runs the script).
func TestGCRAScript(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newClock()
	c, _ := newCluster(t, "a", m.Addr(), clk)
	req := func() limits.SharedRequest {
		return limits.SharedRequest{Principal: "p", Now: clk.Now(), Rates: []limits.Rate{{PerSecond: 10, Burst: 5}}}
	}
	for i := range 5 {
		if v := admit(t, c, req()); v.Refused != -1 {
			t.Fatalf("request %d of the burst refused: %+v", i, v)
		}
	}
	if v := admit(t, c, req()); v.Refused != 0 || v.Retry != 100*time.Millisecond {
		t.Fatalf("past the burst: %+v, want bucket 0 refused with Retry 100ms", v)
	}
	clk.Advance(40 * time.Millisecond)
	if v := admit(t, c, req()); v.Refused != 0 || v.Retry != 60*time.Millisecond {
		t.Fatalf("40ms later: %+v, want Retry 60ms", v)
	}
	clk.Advance(60 * time.Millisecond)
	if v := admit(t, c, req()); v.Refused != -1 {
		t.Fatalf("one interval later: %+v, want admitted", v)
	}
	if v := admit(t, c, req()); v.Refused != 0 {
		t.Fatalf("right after: %+v, want refused", v)
	}
	// Another principal has its own bucket.
	other := req()
	other.Principal = "q"
	if v := admit(t, c, other); v.Refused != -1 {
		t.Fatalf("another principal: %+v, want admitted", v)
	}
}

// TestBucketOutlivesTAT: a bucket's key is still there for a request
// whose now is before the bucket's TAT after Redis's clock has passed it
// (the request queued in its client longer than the write did, or its
// replica's clock lags the writer's, or a test's fake clock runs slow):
// it is refused as GCRA says, not admitted as if the bucket were full.
// The key still expires, bucketSlack after its TAT.
func TestBucketOutlivesTAT(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newClock()
	c, _ := newCluster(t, "a", m.Addr(), clk)
	req := func() limits.SharedRequest {
		return limits.SharedRequest{Principal: "p", Now: clk.Now(), Rates: []limits.Rate{{PerSecond: 10, Burst: 1}}}
	}
	if v := admit(t, c, req()); v.Refused != -1 {
		t.Fatalf("the first request: %+v", v)
	}
	// Redis's clock runs 150ms, past the TAT (100ms); the callers' 40ms.
	m.FastForward(150 * time.Millisecond)
	clk.Advance(40 * time.Millisecond)
	if v := admit(t, c, req()); v.Refused != 0 || v.Retry != 60*time.Millisecond {
		t.Fatalf("40ms later by the callers' clock, 150ms by Redis's: %+v, want refused with Retry 60ms", v)
	}
	clk.Advance(60 * time.Millisecond)
	if v := admit(t, c, req()); v.Refused != -1 {
		t.Fatalf("at the TAT: %+v, want admitted", v)
	}
	key := c.keys.rate("p", "")
	m.FastForward(100*time.Millisecond + bucketSlack - time.Millisecond)
	if !m.Exists(key) {
		t.Fatal("the bucket's key expired before its TAT + bucketSlack by Redis's clock")
	}
	m.FastForward(time.Millisecond)
	if m.Exists(key) {
		t.Errorf("the bucket's key outlived its TAT + bucketSlack: TTL %v", m.TTL(key))
	}
}

// TestGCRAAllOrNothing: a request refused by its tool's bucket takes no
// token from the request rate, and a tool called twice in one batch takes
// two tokens.
func TestGCRAAllOrNothing(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newClock()
	c, _ := newCluster(t, "a", m.Addr(), clk)
	rate := limits.Rate{PerSecond: 1, Burst: 3}
	tool := limits.Rate{Name: "tool\x00echo", PerSecond: 1, Burst: 2}
	req := func(rates ...limits.Rate) limits.SharedRequest {
		return limits.SharedRequest{Principal: "p", Now: clk.Now(), Rates: rates}
	}
	if v := admit(t, c, req(rate, tool, tool)); v.Refused != -1 {
		t.Fatalf("two calls of echo within its burst: %+v", v)
	}
	if v := admit(t, c, req(rate, tool)); v.Refused != 1 {
		t.Fatalf("a third call of echo: %+v, want the tool's bucket (1) refused", v)
	}
	// The refusal took nothing: two request tokens are left.
	for i := range 2 {
		if v := admit(t, c, req(rate)); v.Refused != -1 {
			t.Fatalf("request %d after the tool's refusal: %+v", i, v)
		}
	}
	if v := admit(t, c, req(rate)); v.Refused != 0 {
		t.Fatalf("past the request burst: %+v", v)
	}
}

// TestInFlightShared: the in-flight limit counts across replicas, and a
// released slot is given back off the caller's path.
func TestInFlightShared(t *testing.T) {
	m := miniredis.RunT(t)
	a, _ := newCluster(t, "a", m.Addr(), nil)
	b, _ := newCluster(t, "b", m.Addr(), nil)
	run(t, a)
	// Each counts the slots of the replicas in its live view: b beats,
	// then a, whose view then lists b.
	if err := b.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := limits.SharedRequest{Principal: "p", Now: time.Now(), MaxInFlight: 2}
	if v := admit(t, a, req); v.Refused != -1 {
		t.Fatal(v)
	}
	if v := admit(t, b, req); v.Refused != -1 {
		t.Fatal(v)
	}
	if v := admit(t, a, req); v.Refused != 0 {
		t.Fatalf("a third request in flight: %+v, want the in-flight limit (index 0 of no rates)", v)
	}
	a.Release("p", limits.Slot, 1)
	testkit.WaitFor(t, "the released slot to be given back", func() bool {
		v, err := b.Admit(context.Background(), req)
		return err == nil && v.Refused == -1
	})
	a.Release("p", limits.Slot, 5) // more than taken: the count stops at zero
	testkit.WaitFor(t, "a's count to be deleted", func() bool { return m.HGet(a.keys.inFlight("p"), "a") == "" })
	run(t, b)                      // its releases are sent by its Run
	b.Release("p", limits.Slot, 2) // its first, and the one the wait above took
	testkit.WaitFor(t, "the counter to be deleted with its last count", func() bool { return !m.Exists(a.keys.inFlight("p")) })
}

// TestSessionsShared: two replicas' limiters share a principal's session
// count; a session that ends on one replica is given back by Sweep, and a
// session that failed to open is given back at once.
func TestSessionsShared(t *testing.T) {
	m := miniredis.RunT(t)
	a, _ := newCluster(t, "a", m.Addr(), nil)
	b, _ := newCluster(t, "b", m.Addr(), nil)
	run(t, a)
	run(t, b)
	la := limits.New(&limits.Config{MaxSessions: 2, Shared: a})
	lb := limits.New(&limits.Config{MaxSessions: 2, Shared: b})
	sa, sb := session.NewStore(session.Limits{}), session.NewStore(session.Limits{})
	open := func(l *limits.Limiter, st *session.Store) *session.Session {
		t.Helper()
		commit, ref := l.AdmitSession("p")
		if ref != nil {
			t.Fatalf("AdmitSession: %s", ref.Msg)
		}
		s, err := st.Create("srv", "p", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		commit(s)
		return s
	}
	s1 := open(la, sa)
	open(lb, sb)
	if _, ref := la.AdmitSession("p"); ref == nil {
		t.Fatal("a third session across two replicas admitted with MaxSessions 2")
	}
	// A session that fails to open gives its place back.
	sa.Delete(s1.ID)
	la.Sweep()
	testkit.WaitFor(t, "the ended session to be given back", func() bool {
		got, _ := m.Get(a.keys.sessions("p"))
		return got == "1"
	})
	commit, ref := lb.AdmitSession("p")
	if ref != nil {
		t.Fatalf("after a's session ended, b refused: %s", ref.Msg)
	}
	commit(nil)
	testkit.WaitFor(t, "the session that did not open to be given back", func() bool {
		got, _ := m.Get(a.keys.sessions("p"))
		return got == "1"
	})
	open(lb, sb)
	if _, ref := la.AdmitSession("p"); ref == nil {
		t.Fatal("a third session admitted")
	}
}

// TestThreeReplicasShareRate: three replicas sharing one Redis admit, over
// a run, within 5% of the configured rate, not three times it. The offered
// load is far above the limit; the clock is fake and steps 1ms per attempt,
// and replicas take turns.
func TestThreeReplicasShareRate(t *testing.T) {
	addr := testkit.Redis(t)
	clk := newClock()
	const (
		perSecond = 100
		attempts  = 6000 // 6 s of the fake clock
	)
	var ls []*limits.Limiter
	for _, id := range []string{"a", "b", "c"} {
		c, _ := newCluster(t, id, addr, clk)
		ls = append(ls, limits.New(&limits.Config{RequestsPerSecond: perSecond, Burst: 1, Shared: c, Now: clk.Now}))
	}
	admitted := 0
	for i := range attempts {
		if release, ref := ls[i%3].AdmitRequest("p", nil); ref == nil {
			admitted++
			release()
		}
		clk.Advance(time.Millisecond)
	}
	want := 1 + perSecond*attempts/1000 // the burst, then the rate
	if math.Abs(float64(admitted-want)) > 0.05*float64(want) {
		t.Errorf("three replicas admitted %d requests, want %d within 5%%", admitted, want)
	}
	t.Logf("admitted %d of %d attempts, configured %d", admitted, attempts, want)
}

// TestFallbackWhileRedisDown: with Redis stopped mid-run a replica admits
// its share of the limit (limit / Live, Live 3 as last seen), on its own
// clock; once a heartbeat reaches Redis again the shared buckets count
// again.
func TestFallbackWhileRedisDown(t *testing.T) {
	r := testkit.StartRedis(t)
	clk := newClock()
	var cs []*Cluster
	for _, id := range []string{"a", "b", "c"} {
		c, _ := newCluster(t, id, r.Addr, clk)
		cs = append(cs, c)
	}
	ctx := context.Background()
	for range 2 {
		for _, c := range cs {
			if err := c.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := cs[0]
	if n := a.Live(); n != 3 {
		t.Fatalf("Live() = %d, want 3", n)
	}
	l := limits.New(&limits.Config{RequestsPerSecond: 30, Burst: 30, Shared: a, Now: clk.Now})
	count := func(attempts int) (admitted int) {
		for range attempts {
			if release, ref := l.AdmitRequest("p", nil); ref == nil {
				admitted++
				release()
			}
			clk.Advance(time.Millisecond)
		}
		return admitted
	}
	if n := count(1000); n < 58 || n > 61 {
		t.Fatalf("with Redis up: %d admitted in 1s at 30/s burst 30, want 60", n)
	}

	r.Stop()
	// The share: 10/s with a burst of 10, so 10 + 10 in one second.
	if n := count(1000); n < 19 || n > 21 {
		t.Errorf("with Redis down: %d admitted in 1s, want 20 (limit / 3 live)", n)
	}
	if !a.Down() {
		t.Error("Redis stopped and the cluster does not know")
	}

	r.Start()
	if err := a.Beat(ctx); err != nil {
		t.Fatalf("Beat after restart: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if n := count(1); n != 1 {
		t.Fatal("the first request after Redis came back was refused")
	}
	if n, err := rdb.Exists(ctx, a.keys.rate("p", "")).Result(); err != nil || n != 1 {
		t.Errorf("after recovery the request was not counted in Redis: %d, %v", n, err)
	}
}

// FuzzParseVerdict: no reply of the script, however wrong, panics or
// yields a verdict pointing outside the request's rates.
func FuzzParseVerdict(f *testing.F) {
	f.Add(int64(0), int64(-1), int64(0), 2, 3)
	f.Add(int64(1), int64(1), int64(250), 2, 3)
	f.Add(int64(2), int64(2), int64(0), 2, 3)
	f.Add(int64(1), int64(5), int64(1), 2, 3)
	f.Add(int64(1), int64(0), int64(-1), 1, 2)
	f.Fuzz(func(t *testing.T, status, index, wait int64, n, length int) {
		n = max(0, min(n, 64))
		reply := []int64{status, index, wait}[:max(0, min(length, 3))]
		v, err := parseVerdict(reply, n)
		if err != nil {
			return
		}
		if v.Refused < -1 || v.Refused > n || v.Retry < 0 {
			t.Fatalf("parseVerdict(%v, %d) = %+v", reply, n, v)
		}
	})
}

// TestSharedRefusalsReadAsLocal: a refusal of the shared store reads as
// the local limiter's would (message and a Retry-After from the bucket).
func TestSharedRefusalsReadAsLocal(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newClock()
	c, _ := newCluster(t, "a", m.Addr(), clk)
	call, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []jsonrpc.Message{call}
	l := limits.New(&limits.Config{RequestsPerSecond: 10, Burst: 2, ToolsPerSecond: 1, MaxInFlight: 1, Shared: c, Now: clk.Now})
	release, ref := l.AdmitRequest("p", msgs)
	if ref != nil {
		t.Fatal(ref.Msg)
	}
	if _, ref := l.AdmitRequest("p", msgs); ref == nil || ref.Msg != "too many requests in flight (limit 1)" {
		t.Fatalf("a second request in flight: %+v", ref)
	}
	release()
	run(t, c)
	var last *limits.Refusal
	testkit.WaitFor(t, "the slot to be given back", func() bool {
		_, last = l.AdmitRequest("p", msgs)
		return last == nil || last.Msg != "too many requests in flight (limit 1)"
	})
	if last == nil || last.Msg != `rate limit exceeded for tool "echo"` || last.Retry != time.Second {
		t.Fatalf("a second call of echo in one second at 1/s: %+v", last)
	}
	clk.Advance(time.Second)
	for range 2 { // the burst
		if _, ref := l.AdmitRequest("p", nil); ref != nil {
			t.Fatal(ref.Msg)
		}
	}
	if _, ref := l.AdmitRequest("p", nil); ref == nil || ref.Msg != "request rate limit exceeded" || ref.Retry != 100*time.Millisecond {
		t.Fatalf("past the request burst: %+v", ref)
	}
}

// TestRefusedSessionKeepsTTL: a principal's session count lives SessionTTL
// past the last session opened, as Config says (a replica that crashed
// never gives its sessions back, so only the TTL ends what it counted):
// a refused attempt does not renew it, or a principal who keeps trying
// would be locked out for good.
func TestRefusedSessionKeepsTTL(t *testing.T) {
	m := miniredis.RunT(t)
	c, _ := newCluster(t, "a", m.Addr(), nil)
	ctx := context.Background()
	if ok, err := c.AdmitSession(ctx, "p", 1, 0); !ok || err != nil {
		t.Fatalf("the first session: %v, %v", ok, err)
	}
	key := c.keys.sessions("p")
	m.FastForward(time.Hour)
	left := m.TTL(key)
	if left <= 0 || left >= c.cfg.SessionTTL {
		t.Fatalf("the count's TTL after an hour: %v", left)
	}
	if ok, err := c.AdmitSession(ctx, "p", 1, 0); ok || err != nil {
		t.Fatalf("a second session with MaxSessions 1: %v, %v", ok, err)
	}
	if got := m.TTL(key); got != left {
		t.Errorf("a refused session moved the count's TTL from %v to %v", left, got)
	}
	m.FastForward(left)
	if ok, err := c.AdmitSession(ctx, "p", 1, 0); !ok || err != nil {
		t.Errorf("SessionTTL after the last session opened: %v, %v; want admitted", ok, err)
	}
}

// TestReleasesSentAtStop: the counts queued for release when Run stops
// (a replica shutting down gives back the sessions it ended) reach Redis
// before Run returns, rather than staying counted until their TTL.
func TestReleasesSentAtStop(t *testing.T) {
	m := miniredis.RunT(t)
	c, _ := newCluster(t, "a", m.Addr(), nil)
	const n = 64
	for range n {
		if ok, err := c.AdmitSession(context.Background(), "p", n, 0); !ok || err != nil {
			t.Fatalf("AdmitSession: %v, %v", ok, err)
		}
	}
	for range n {
		c.Release("p", limits.Session, 1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stopped before it sent any
	c.Run(ctx)
	if got, _ := m.Get(c.keys.sessions("p")); got != "" {
		t.Errorf("after Run returned, %s of %d released sessions still counted", got, n)
	}
}

// TestInFlightOfDeadReplicaFreed: the slots a replica held when it died
// count no more once it left the live view, though the principal's
// requests keep the counter's key alive (a replica killed with requests
// in flight must not lock its principals out).
func TestInFlightOfDeadReplicaFreed(t *testing.T) {
	addr := testkit.Redis(t)
	clk := newClock()
	a, _ := newCluster(t, "a", addr, clk)
	b, _ := newCluster(t, "b", addr, clk)
	ctx := context.Background()
	beat := func(cs ...*Cluster) {
		t.Helper()
		for _, x := range cs {
			if err := x.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	beat(a, b, a)
	req := limits.SharedRequest{Principal: "p", MaxInFlight: 2}
	for range 2 {
		req.Now = clk.Now()
		if v := admit(t, b, req); v.Refused != -1 {
			t.Fatalf("b: %+v", v)
		}
	}
	req.Now = clk.Now()
	if v := admit(t, a, req); v.Refused != 0 {
		t.Fatalf("a with b's two slots taken: %+v, want the in-flight limit", v)
	}
	// b dies with its two requests in flight; a's requests go on.
	clk.Advance(3*time.Second + time.Millisecond)
	beat(a)
	req.Now = clk.Now()
	if v := admit(t, a, req); v.Refused != -1 {
		t.Fatalf("a after b died: %+v, want admitted (b's slots died with it)", v)
	}
}
