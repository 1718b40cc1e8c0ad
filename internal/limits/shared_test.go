package limits

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
)

// downStore is a Shared store that is down: every call fails, as
// internal/cluster's do while Redis is unreachable, and Live is the last
// number of live replicas it saw. (The store that works is tested with a
// real Redis in internal/cluster.)
type downStore struct {
	live int

	mu       sync.Mutex
	calls    int
	released int
}

var errDown = errors.New("store down")

func (d *downStore) Admit(context.Context, SharedRequest) (SharedVerdict, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return SharedVerdict{}, errDown
}

func (d *downStore) AdmitSession(context.Context, string, int, int) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return false, errDown
}

func (d *downStore) Release(_ string, _ Counted, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released += n
}

func (d *downStore) Live() int { return d.live }

// TestSharedDownFallsBackToShare: with the store failing and 4 replicas
// live, each limit is a quarter: the rate and its burst, the tool rate,
// requests in flight and sessions; with 1 live, the whole limit again.
func TestSharedDownFallsBackToShare(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	store := &downStore{live: 4}
	l := New(&Config{RequestsPerSecond: 40, Burst: 8, MaxInFlight: 8, MaxSessions: 8, Shared: store, Now: clock.Now})
	sessions := session.NewStore(session.Limits{})
	req := mustParse(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)

	admitted := 0
	for range 10 {
		if release, ref := l.AdmitRequest("p", nil); ref == nil {
			admitted++
			release()
		}
	}
	if admitted != 2 {
		t.Errorf("burst with 4 live: %d admitted, want 8/4 = 2", admitted)
	}
	clock.advance(100 * time.Millisecond) // 40/4 = 10/s: one token
	if _, ref := l.AdmitRequest("p", nil); ref != nil {
		t.Errorf("100ms later at 10/s: %s", ref.Msg)
	}
	if _, ref := l.AdmitRequest("p", nil); ref == nil || ref.Msg != "request rate limit exceeded" {
		t.Errorf("right after: %v, want the rate refusal", ref)
	}

	clock.advance(time.Second)
	var releases []func()
	for range 2 {
		release, ref := l.AdmitRequest("q", []jsonrpc.Message{req})
		if ref != nil {
			t.Fatalf("in flight within the share: %s", ref.Msg)
		}
		releases = append(releases, release)
	}
	if _, ref := l.AdmitRequest("q", []jsonrpc.Message{req}); ref == nil || !strings.HasPrefix(ref.Msg, "too many requests in flight (limit 8)") {
		t.Errorf("a third in flight with 8/4 = 2: %v", ref)
	}
	for _, r := range releases {
		r()
	}

	for i := range 2 {
		commit, ref := l.AdmitSession("q")
		if ref != nil {
			t.Fatalf("session %d within the share: %s", i, ref.Msg)
		}
		s, err := sessions.Create("srv", "q", clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		commit(s)
	}
	if _, ref := l.AdmitSession("q"); ref == nil || !strings.HasPrefix(ref.Msg, "too many sessions (limit 8)") {
		t.Errorf("a third session with 8/4 = 2: %v", ref)
	}
	l.Sweep()
	if store.released != 0 {
		t.Errorf("%d sessions given back to the store that never counted them", store.released)
	}

	// One replica left: the bucket grows to the whole limit (a bucket
	// that grows is not refilled at once: it fills at the new rate).
	store.live = 1
	if _, ref := l.AdmitRequest("p", nil); ref != nil {
		t.Fatal(ref.Msg)
	}
	clock.advance(time.Second)
	admitted = 0
	for range 10 {
		if _, ref := l.AdmitRequest("p", nil); ref == nil {
			admitted++
		}
	}
	if admitted != 8 {
		t.Errorf("burst with 1 live: %d admitted, want 8", admitted)
	}
}

// TestSharedNotAskedWithoutLimits: a Limiter whose only limit is the
// global cap never calls the store.
func TestSharedNotAskedWithoutLimits(t *testing.T) {
	store := &downStore{live: 2}
	l := New(&Config{MaxInFlightTotal: 5, Shared: store})
	req := mustParse(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	for range 3 {
		release, ref := l.AdmitRequest("p", []jsonrpc.Message{req})
		if ref != nil {
			t.Fatal(ref.Msg)
		}
		release()
	}
	if store.calls != 0 {
		t.Errorf("the store was asked %d times, want 0", store.calls)
	}
}

func mustParse(t *testing.T, s string) jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
