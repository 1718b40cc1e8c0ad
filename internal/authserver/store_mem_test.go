package authserver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Expired requests are refused at once but dropped at most once every
// sweepEvery: a burst of puts does not walk the table each time.
func TestMemStoreSweepBounded(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	m := newMemStore(clock.Now, time.Minute)
	put := func(id string) {
		t.Helper()
		if err := m.PutAuthRequest(ctx, &AuthRequest{ID: id}, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	size := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.requests)
	}
	put("a") // the first put sweeps (nothing) and sets the next sweep
	clock.Advance(2 * time.Second)
	for i := range 100 {
		put(fmt.Sprint("b", i))
	}
	if _, err := m.AuthRequest(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an expired request: %v, want ErrNotFound", err)
	}
	if n := size(); n != 101 {
		t.Errorf("%d requests kept before the next sweep, want 101 (no sweep within sweepEvery)", n)
	}
	clock.Advance(sweepEvery)
	put("c")
	if n := size(); n != 1 {
		t.Errorf("%d requests after the sweep, want 1", n)
	}
}

// Rotate finds a token's grant through the indexes, which follow every
// change: a rotation, the window's trim, a replacement, a revocation.
func TestMemStoreRefreshIndex(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	m := newMemStore(time.Now, time.Minute)
	for i := range 1000 {
		if err := m.PutGrant(ctx, testGrant(fmt.Sprint("g", i), "c", fmt.Sprint("r", i), now)); err != nil {
			t.Fatal(err)
		}
	}
	sizes := func() (int, int) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.refresh), len(m.previous)
	}
	link := func(i int) Hash { return secret(fmt.Sprint("r7/", i)) }
	if _, err := m.Rotate(ctx, secret("r7"), link(0), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := range maxPrevious + 5 {
		if _, err := m.Rotate(ctx, link(i), link(i+1), now.Add(time.Hour)); err != nil {
			t.Fatalf("rotation %d: %v", i, err)
		}
	}
	if r, p := sizes(); r != 1000 || p != maxPrevious {
		t.Errorf("indexes after g7's rotations: %d current, %d replaced; want 1000, %d", r, p, maxPrevious)
	}
	// Replacing a grant forgets its old tokens.
	if err := m.PutGrant(ctx, testGrant("g7", "c", "fresh", now)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Rotate(ctx, link(maxPrevious+5), secret("x"), now.Add(time.Hour)); !errors.Is(err, ErrNotFound) {
		t.Errorf("a replaced grant's token: %v, want ErrNotFound", err)
	}
	if r, p := sizes(); r != 1000 || p != 0 {
		t.Errorf("indexes after replacing g7: %d, %d; want 1000, 0", r, p)
	}
	if err := m.RevokeGrant(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	if r, _ := sizes(); r != 999 {
		t.Errorf("current tokens after revoking g3: %d, want 999", r)
	}
	if _, err := m.Rotate(ctx, secret("r3"), secret("x"), now.Add(time.Hour)); !errors.Is(err, ErrNotFound) {
		t.Errorf("a revoked grant's token: %v, want ErrNotFound", err)
	}
}
