package authserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// storeUnderTest is one kind of Store for the contract test: open gives
// a fresh store on clock; advance moves time for the store and for
// whatever expires its records (nil: the kind cannot move time, so the
// expiry checks are skipped).
type storeUnderTest struct {
	open    func(t *testing.T, clock *testkit.Clock) Store
	advance func(clock *testkit.Clock, d time.Duration)
}

// revokedFor is the access token TTL the contract test's stores are
// opened with.
const revokedFor = 10 * time.Minute

func secret(s string) Hash { return sha256.Sum256([]byte(s)) }

func testGrant(id, client, refresh string, now time.Time) *Grant {
	return &Grant{
		ID: id, User: "ann", ClientID: client, Resource: "https://gw.example/servers/memory/mcp",
		Scopes: []string{"mcp"}, CreatedAt: now, LastUsed: now,
		Refresh: secret(refresh), Expires: now.Add(30 * 24 * time.Hour),
	}
}

// testStoreContract checks the Store contract of store.go on the stores
// kind opens: every kind behaves alike.
func testStoreContract(t *testing.T, kind storeUnderTest) {
	ctx := context.Background()
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

	t.Run("clients", func(t *testing.T) {
		clock := testkit.NewClock(start)
		s := kind.open(t, clock)
		c := &Client{ID: "c1", Name: "Claude", RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"},
			SecretHash: secret("shh"), AuthMethod: "client_secret_post", CreatedAt: start}
		if err := s.PutClient(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.RedirectURIs[0] = "changed by the caller"
		got, err := s.Client(ctx, "c1")
		if err != nil || got.Name != "Claude" || got.RedirectURIs[0] != "https://claude.ai/api/mcp/auth_callback" || got.SecretHash != secret("shh") {
			t.Fatalf("Client: %+v %v", got, err)
		}
		if err := s.PutClient(ctx, &Client{ID: "c2", AuthMethod: "none", CreatedAt: start.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		list, err := s.Clients(ctx)
		if err != nil || len(list) != 2 || list[0].ID != "c1" || list[1].ID != "c2" {
			t.Fatalf("Clients: %v %v", list, err)
		}
		if _, err := s.Client(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown client: %v, want ErrNotFound", err)
		}
		g := testGrant("g1", "c1", "r1", start)
		if err := s.PutGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteClient(ctx, "c1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Client(ctx, "c1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted client: %v, want ErrNotFound", err)
		}
		if _, err := s.Grant(ctx, "g1"); !errors.Is(err, ErrNotFound) || !s.Revoked("g1") {
			t.Errorf("the deleted client's grant: %v, revoked %v; want it revoked", err, s.Revoked("g1"))
		}
	})

	t.Run("requests", func(t *testing.T) {
		clock := testkit.NewClock(start)
		s := kind.open(t, clock)
		r := &AuthRequest{ID: "req1", ClientID: "c1", Scopes: []string{"mcp"}, CodeChallenge: "x", CodeChallengeMethod: "S256", CSRF: "csrf"}
		if err := s.PutAuthRequest(ctx, r, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		got, err := s.AuthRequest(ctx, "req1")
		if err != nil || got.CSRF != "csrf" || !slices.Equal(got.Scopes, []string{"mcp"}) {
			t.Fatalf("AuthRequest: %+v %v", got, err)
		}
		if err := s.DeleteAuthRequest(ctx, "req1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuthRequest(ctx, "req1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted request: %v", err)
		}
		if kind.advance == nil {
			return
		}
		if err := s.PutAuthRequest(ctx, &AuthRequest{ID: "req2"}, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		kind.advance(clock, 10*time.Minute)
		if _, err := s.AuthRequest(ctx, "req2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("request past its ttl: %v, want ErrNotFound", err)
		}
	})

	t.Run("codes", func(t *testing.T) {
		clock := testkit.NewClock(start)
		s := kind.open(t, clock)
		code := secret("code")
		if err := s.PutCode(ctx, code, "req1", 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		if id, err := s.TakeCode(ctx, code); err != nil || id != "req1" {
			t.Fatalf("TakeCode: %q %v", id, err)
		}
		if err := s.PutGrant(ctx, testGrant("g1", "c1", "r1", start)); err != nil {
			t.Fatal(err)
		}
		if err := s.CodeGrant(ctx, code, "g1"); err != nil {
			t.Fatal(err)
		}
		if s.Revoked("g1") {
			t.Fatal("g1 revoked before any replay")
		}
		if _, err := s.TakeCode(ctx, code); !errors.Is(err, ErrReused) {
			t.Fatalf("replayed code: %v, want ErrReused", err)
		}
		if _, err := s.Grant(ctx, "g1"); !errors.Is(err, ErrNotFound) || !s.Revoked("g1") {
			t.Errorf("the replayed code's grant: %v, revoked %v", err, s.Revoked("g1"))
		}
		if _, err := s.TakeCode(ctx, secret("never issued")); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown code: %v, want ErrNotFound", err)
		}
		if err := s.CodeGrant(ctx, secret("never issued"), "g1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("CodeGrant of an unknown code: %v, want ErrNotFound", err)
		}
		if kind.advance == nil {
			return
		}
		late := secret("late")
		if err := s.PutCode(ctx, late, "req2", 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		kind.advance(clock, 2*time.Minute)
		if _, err := s.TakeCode(ctx, late); !errors.Is(err, ErrNotFound) {
			t.Errorf("code past its ttl: %v, want ErrNotFound", err)
		}
	})

	t.Run("grants", func(t *testing.T) {
		clock := testkit.NewClock(start)
		s := kind.open(t, clock)
		g := testGrant("g1", "c1", "r1", start)
		if err := s.PutGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
		if err := s.PutGrant(ctx, testGrant("g2", "c1", "other", start.Add(time.Second))); err != nil {
			t.Fatal(err)
		}
		list, err := s.Grants(ctx)
		if err != nil || len(list) != 2 || list[0].ID != "g1" || list[1].ID != "g2" {
			t.Fatalf("Grants: %v %v", list, err)
		}
		expires := start.Add(31 * 24 * time.Hour)
		got, err := s.Rotate(ctx, secret("r1"), secret("r2"), expires)
		if err != nil || got.ID != "g1" || got.Refresh != secret("r2") || !got.Expires.Equal(expires) || !slices.Contains(got.Previous, secret("r1")) {
			t.Fatalf("Rotate: %+v %v", got, err)
		}
		if g, err := s.Grant(ctx, "g1"); err != nil || g.Refresh != secret("r2") || g.User != "ann" || g.Resource != testGrant("", "", "", start).Resource {
			t.Fatalf("Grant after Rotate: %+v %v", g, err)
		}
		if _, err := s.Rotate(ctx, secret("never issued"), secret("x"), expires); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown refresh token: %v, want ErrNotFound", err)
		}
		// The replaced token again: reuse, the whole grant revoked.
		if _, err := s.Rotate(ctx, secret("r1"), secret("r3"), expires); !errors.Is(err, ErrReused) {
			t.Fatalf("reused refresh token: %v, want ErrReused", err)
		}
		if !s.Revoked("g1") || s.Revoked("g2") {
			t.Errorf("after reuse: g1 revoked %v (want true), g2 %v (want false)", s.Revoked("g1"), s.Revoked("g2"))
		}
		if _, err := s.Rotate(ctx, secret("r2"), secret("r4"), expires); err == nil {
			t.Error("the current token of a revoked grant still rotates")
		}
		if err := s.PutGrant(ctx, testGrant("g1", "c1", "r5", start)); !errors.Is(err, ErrNotFound) {
			t.Errorf("PutGrant of a revoked grant: %v, want ErrNotFound", err)
		}
		if err := s.RevokeGrant(ctx, "g2"); err != nil || !s.Revoked("g2") {
			t.Fatalf("RevokeGrant: %v, revoked %v", err, s.Revoked("g2"))
		}
		if _, err := s.Rotate(ctx, secret("other"), secret("x"), expires); !errors.Is(err, ErrNotFound) {
			t.Errorf("refresh of a revoked grant: %v, want ErrNotFound", err)
		}
		if list, _ := s.Grants(ctx); len(list) != 0 {
			t.Errorf("Grants after revoking both: %v", list)
		}
		if kind.advance == nil {
			return
		}
		// A revocation is remembered as long as an access token lives.
		kind.advance(clock, revokedFor)
		if s.Revoked("g2") {
			t.Error("g2 still revoked past the access token TTL")
		}
		g3 := testGrant("g3", "c1", "r6", clock.Now())
		g3.Expires = clock.Now().Add(time.Hour)
		if err := s.PutGrant(ctx, g3); err != nil {
			t.Fatal(err)
		}
		kind.advance(clock, time.Hour)
		if _, err := s.Rotate(ctx, secret("r6"), secret("r7"), clock.Now().Add(time.Hour)); !errors.Is(err, ErrNotFound) {
			t.Errorf("expired refresh token: %v, want ErrNotFound", err)
		}
	})

	// A grant remembers the last maxPrevious tokens it replaced: one of
	// those again is reuse (the grant revoked); an older one is merely
	// unknown.
	t.Run("rotation window", func(t *testing.T) {
		s := kind.open(t, testkit.NewClock(start))
		if err := s.PutGrant(ctx, testGrant("g1", "c1", "t0", start)); err != nil {
			t.Fatal(err)
		}
		expires := start.Add(time.Hour)
		for i := range maxPrevious + 2 {
			if _, err := s.Rotate(ctx, secret(fmt.Sprint("t", i)), secret(fmt.Sprint("t", i+1)), expires); err != nil {
				t.Fatalf("rotation %d: %v", i, err)
			}
		}
		g, err := s.Grant(ctx, "g1")
		if err != nil || len(g.Previous) != maxPrevious || g.Previous[0] != secret("t2") {
			t.Fatalf("after %d rotations: %d previous, %v", maxPrevious+2, len(g.Previous), err)
		}
		if _, err := s.Rotate(ctx, secret("t1"), secret("x"), expires); !errors.Is(err, ErrNotFound) || s.Revoked("g1") {
			t.Errorf("a token older than the window: %v, revoked %v; want ErrNotFound, not revoked", err, s.Revoked("g1"))
		}
		if _, err := s.Rotate(ctx, secret("t2"), secret("x"), expires); !errors.Is(err, ErrReused) || !s.Revoked("g1") {
			t.Errorf("the oldest token in the window: %v, revoked %v; want ErrReused", err, s.Revoked("g1"))
		}
	})

	t.Run("seed and passkeys", func(t *testing.T) {
		s := kind.open(t, testkit.NewClock(start))
		a, err := s.Seed(ctx)
		if err != nil || len(a) != 32 {
			t.Fatalf("Seed: %x %v", a, err)
		}
		b, err := s.Seed(ctx)
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("second Seed: %x %v, want %x", b, err, a)
		}
		for i, id := range []string{"k1", "k2"} {
			if err := s.PutPasskey(ctx, &Passkey{User: "ann", ID: []byte(id), Data: []byte(`{}`), CreatedAt: start.Add(time.Duration(i))}); err != nil {
				t.Fatal(err)
			}
		}
		list, err := s.Passkeys(ctx, "ann")
		if err != nil || len(list) != 2 || string(list[0].ID) != "k1" || string(list[1].ID) != "k2" {
			t.Fatalf("Passkeys: %v %v", list, err)
		}
		if list, err := s.Passkeys(ctx, "bob"); err != nil || len(list) != 0 {
			t.Errorf("Passkeys of a user with none: %v %v", list, err)
		}
	})
}

func memKind() storeUnderTest {
	return storeUnderTest{
		open: func(t *testing.T, clock *testkit.Clock) Store {
			return newMemStore(clock.Now, revokedFor)
		},
		advance: func(clock *testkit.Clock, d time.Duration) { clock.Advance(d) },
	}
}

func TestMemStoreContract(t *testing.T) { testStoreContract(t, memKind()) }
