package authserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// noLeaks fails t if a goroutine started during it outlives its
// cleanups (the stores' subscribers, the clients' connections): call it
// first, so that its check runs after every other cleanup.
func noLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// redisClient is a client as gateway.cluster's is: every wait bounded,
// no retries.
func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		PoolTimeout: time.Second, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, DisableIdentity: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// openRedisForTest opens a Redis store on addr, closed at cleanup.
func openRedisForTest(t *testing.T, addr string, clock *testkit.Clock) *redisStore {
	t.Helper()
	s, err := openRedisStore(context.Background(), redisClient(t, addr), clock.Now, revokedFor)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func miniredisKind() storeUnderTest {
	var m *miniredis.Miniredis
	return storeUnderTest{
		open: func(t *testing.T, clock *testkit.Clock) Store {
			m = miniredis.RunT(t)
			return openRedisForTest(t, m.Addr(), clock)
		},
		advance: func(clock *testkit.Clock, d time.Duration) {
			clock.Advance(d)
			m.FastForward(d)
		},
	}
}

func realRedisKind() storeUnderTest {
	return storeUnderTest{open: func(t *testing.T, clock *testkit.Clock) Store {
		return openRedisForTest(t, testkit.Redis(t), clock)
	}}
}

func TestRedisStoreContract(t *testing.T) {
	noLeaks(t)
	t.Run("miniredis", func(t *testing.T) { testStoreContract(t, miniredisKind()) })
	t.Run("redis", func(t *testing.T) { testStoreContract(t, realRedisKind()) })
}

// Two replicas sharing one Redis see each other's clients and grants; a
// code issued on one is redeemed exactly once across both, however many
// redeem it at once, and the losers' replay revokes the grant; a
// revocation on one is refused by the other's Revoked once the channel
// told it (and by its own at once).
func TestRedisStoreTwoReplicas(t *testing.T) {
	noLeaks(t)
	for _, c := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
		{"redis", func(t *testing.T) string { return testkit.Redis(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clock := testkit.NewClock(time.Now())
			addr := c.addr(t)
			a, b := openRedisForTest(t, addr, clock), openRedisForTest(t, addr, clock)

			if err := a.PutClient(ctx, &Client{ID: "c1", Name: "Claude", AuthMethod: "none", CreatedAt: clock.Now()}); err != nil {
				t.Fatal(err)
			}
			if got, err := b.Client(ctx, "c1"); err != nil || got.Name != "Claude" {
				t.Fatalf("b sees a's client: %+v %v", got, err)
			}
			if err := a.PutAuthRequest(ctx, &AuthRequest{ID: "req1", ClientID: "c1"}, time.Minute); err != nil {
				t.Fatal(err)
			}
			if r, err := b.AuthRequest(ctx, "req1"); err != nil || r.ClientID != "c1" {
				t.Fatalf("b sees a's request: %+v %v", r, err)
			}

			code := secret("the code")
			if err := a.PutCode(ctx, code, "req1", time.Minute); err != nil {
				t.Fatal(err)
			}
			const racers = 8
			var wg sync.WaitGroup
			results := make(chan error, racers)
			for i := range racers {
				s := a
				if i%2 == 1 {
					s = b
				}
				wg.Go(func() {
					id, err := s.TakeCode(ctx, code)
					if err == nil && id != "req1" {
						err = fmt.Errorf("redeemed for %q", id)
					}
					results <- err
				})
			}
			wg.Wait()
			close(results)
			won := 0
			for err := range results {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, ErrReused):
					t.Errorf("a losing redemption: %v, want ErrReused", err)
				}
			}
			if won != 1 {
				t.Fatalf("%d redemptions of one code succeeded, want exactly 1", won)
			}

			// The raced code was replayed before its grant was recorded,
			// so recording one revokes it (the Store contract): the grant
			// below is another code's, redeemed once.
			code = secret("the second code")
			if err := a.PutCode(ctx, code, "req1", time.Minute); err != nil {
				t.Fatal(err)
			}
			if id, err := a.TakeCode(ctx, code); err != nil || id != "req1" {
				t.Fatalf("TakeCode: %q %v", id, err)
			}
			g := testGrant("g1", "c1", "r1", clock.Now())
			if err := a.PutGrant(ctx, g); err != nil {
				t.Fatal(err)
			}
			if err := a.CodeGrant(ctx, code, "g1"); err != nil {
				t.Fatal(err)
			}
			if got, err := b.Rotate(ctx, secret("r1"), secret("r2"), clock.Now().Add(time.Hour)); err != nil || got.ID != "g1" {
				t.Fatalf("b rotates a's grant: %+v %v", got, err)
			}
			if list, err := a.Grants(ctx); err != nil || len(list) != 1 || list[0].Refresh != secret("r2") {
				t.Fatalf("a's view of the rotated grant: %v %v", list, err)
			}

			// The code replayed on b revokes g1: b knows at once, a by
			// the channel.
			if _, err := b.TakeCode(ctx, code); !errors.Is(err, ErrReused) {
				t.Fatalf("replay: %v", err)
			}
			if !b.Revoked("g1") {
				t.Error("the replica that revoked does not know it at once")
			}
			testkit.WaitFor(t, "a to learn of g1's revocation", func() bool { return a.Revoked("g1") })

			if err := b.PutGrant(ctx, testGrant("g2", "c1", "x1", clock.Now())); err != nil {
				t.Fatal(err)
			}
			if err := b.RevokeGrant(ctx, "g2"); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "a to learn of g2's revocation", func() bool { return a.Revoked("g2") })
			if _, err := a.Rotate(ctx, secret("x1"), secret("x2"), clock.Now().Add(time.Hour)); !errors.Is(err, ErrNotFound) {
				t.Errorf("a rotates a grant b revoked: %v", err)
			}

			// A replica started later loads the revocations made before.
			late := openRedisForTest(t, addr, clock)
			if !late.Revoked("g1") || !late.Revoked("g2") {
				t.Error("a replica started after the revocations does not know them")
			}

			sa, err := a.Seed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if sb, err := b.Seed(ctx); err != nil || string(sa) != string(sb) {
				t.Errorf("the replicas' seeds differ: %v", err)
			}
		})
	}
}

// With Redis stopped, every call returns an error, none hangs (the test
// has no deadline of its own: a hang is the test binary's timeout), and
// Revoked still answers from memory; a store opened meanwhile opens,
// refusing every grant until it has read the revoked set; once Redis is
// back, so are the calls, the late store learns the set, and a
// revocation made while this replica's subscription was down reaches it
// (the load at resubscription).
func TestRedisStoreDown(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	clock := testkit.NewClock(time.Now())
	r := testkit.StartRedis(t)
	s := openRedisForTest(t, r.Addr, clock)
	if err := s.PutGrant(ctx, testGrant("g1", "c1", "r1", clock.Now())); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeGrant(ctx, "g1"); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	calls := map[string]func() error{
		"PutClient": func() error { return s.PutClient(ctx, &Client{ID: "c"}) },
		"Client":    func() error { _, err := s.Client(ctx, "c"); return err },
		"Clients":   func() error { _, err := s.Clients(ctx); return err },
		"PutCode":   func() error { return s.PutCode(ctx, secret("c"), "r", time.Minute) },
		"TakeCode":  func() error { _, err := s.TakeCode(ctx, secret("c")); return err },
		"PutGrant":  func() error { return s.PutGrant(ctx, testGrant("g2", "c", "r2", clock.Now())) },
		"Rotate": func() error {
			_, err := s.Rotate(ctx, secret("r2"), secret("r3"), clock.Now().Add(time.Hour))
			return err
		},
		"RevokeGrant": func() error { return s.RevokeGrant(ctx, "g2") },
		"Seed":        func() error { _, err := s.Seed(ctx); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s with Redis down: %v, want ErrUnavailable", name, err)
		}
	}
	if s.downUntil.Load() == 0 {
		t.Error("Redis not marked down after failed calls: each would wait for it")
	}
	if !s.Revoked("g1") {
		t.Error("Revoked forgot g1 while Redis is down")
	}
	late, err := openRedisStore(ctx, redisClient(t, r.Addr), clock.Now, revokedFor)
	if err != nil {
		t.Fatalf("a store opened with Redis down: %v, want it open (its calls failing until Redis is back)", err)
	}
	t.Cleanup(func() { _ = late.Close() })
	if !late.Revoked("g1") || !late.Revoked("never-revoked") {
		t.Error("a store opened with Redis down accepts grants it cannot know were not revoked")
	}
	if _, err := late.Client(ctx, "c1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a call of a store opened with Redis down: %v, want ErrUnavailable", err)
	}

	r.Start()
	testkit.WaitFor(t, "the store opened while Redis was down to load the revoked set", func() bool {
		return !late.Revoked("never-revoked")
	})

	other := openRedisForTest(t, r.Addr, clock)
	testkit.WaitFor(t, "calls to work again", func() bool { return s.PutClient(ctx, &Client{ID: "back"}) == nil })
	if err := other.RevokeGrant(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the revocation made after the outage to reach the first store", func() bool { return s.Revoked("g3") })
	testkit.WaitFor(t, "the revocation made after the outage to reach the store opened during it", func() bool { return late.Revoked("g3") })
}

// The sets indexing grants expire with the last grant in them, so a
// client whose grants all expired unused leaves nothing behind.
func TestRedisStoreSetsExpire(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	clock := testkit.NewClock(time.Now())
	s := openRedisForTest(t, m.Addr(), clock)
	short, long := testGrant("g1", "c1", "r1", clock.Now()), testGrant("g2", "c1", "r2", clock.Now())
	short.Expires, long.Expires = clock.Now().Add(time.Hour), clock.Now().Add(2*time.Hour)
	for _, g := range []*Grant{long, short} {
		if err := s.PutGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	// A refresh moves the sets' expiry with it.
	if _, err := s.Rotate(ctx, secret("r1"), secret("r3"), clock.Now().Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{redisPrefix + "grants", redisPrefix + "clientgrants:c1"} {
		if ttl := m.TTL(key); ttl != 3*time.Hour {
			t.Errorf("%s lives %v, want 3h (its longest grant)", key, ttl)
		}
	}
	m.FastForward(3 * time.Hour)
	clock.Advance(3 * time.Hour)
	for _, key := range m.Keys() {
		t.Errorf("left after every grant expired: %s", key)
	}
}

// Only a Redis that cannot be reached counts as down: a record that does
// not decode is an error of its own, and the next call still asks Redis.
func TestRedisStoreBadRecordIsNotDown(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	s := openRedisForTest(t, m.Addr(), testkit.NewClock(time.Now()))
	if err := m.Set(redisPrefix+"client:bad", "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client(ctx, "bad"); err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) {
		t.Errorf("a record that does not decode: %v", err)
	}
	if err := s.PutClient(ctx, &Client{ID: "good"}); err != nil {
		t.Errorf("the call after a bad record: %v", err)
	}
}

// OpenStore with a Redis client gives the Redis store; without, with a
// state file, the file store.
func TestOpenStoreKinds(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	s, err := OpenStore(ctx, config.AuthServer{AccessTokenTTL: time.Minute}, "", redisClient(t, m.Addr()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*redisStore); !ok {
		t.Errorf("with Redis: %T", s)
	}
	f, err := OpenStore(ctx, config.AuthServer{StateFile: "a.json"}, t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*fileStore); !ok {
		t.Errorf("with a state file: %T", f)
	}
}

func TestParseRevocation(t *testing.T) {
	for _, c := range []struct {
		in   string
		id   string
		ms   int64
		okay bool
	}{
		{"g1 1700000000000", "g1", 1700000000000, true},
		{"g1", "", 0, false},
		{" 12", "", 0, false},
		{"g1 x", "", 0, false},
	} {
		id, until, ok := parseRevocation(c.in)
		if ok != c.okay || id != c.id || (ok && until.UnixMilli() != c.ms) {
			t.Errorf("parseRevocation(%q) = %q %v %v", c.in, id, until, ok)
		}
	}
}

func FuzzParseRevocation(f *testing.F) {
	f.Add("g1 1700000000000")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		id, until, ok := parseRevocation(s)
		if !ok {
			return
		}
		again, until2, ok2 := parseRevocation(fmt.Sprint(id, " ", until.UnixMilli()))
		if id == "" || !ok2 || again != id || !until2.Equal(until) {
			t.Fatalf("accepted %q as %q %v, which does not read back", s, id, until)
		}
	})
}
