package front

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/cluster"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// syncBackend is a portableBackend whose connections register an apply
// function (conn.WithStateUpdates) that records the states given, and
// whose handoff sinks the test can call, as a connection does after a
// change (a logging/setLevel). Like a real connection, a state equal to
// the one it has changes nothing, and is not recorded (the front gives a
// connection its own newest state again when the connection changed while
// a newer one was being applied).
type syncBackend struct {
	*portableBackend
	applied chan string
	mu      sync.Mutex
	sinks   []func([]byte)
	current string // the newest connection's state
}

func newSyncBackend() *syncBackend {
	return &syncBackend{portableBackend: &portableBackend{fakeBackend: newFakeBackend()}, applied: make(chan string, 64)}
}

func (b *syncBackend) register(ctx context.Context) {
	b.mu.Lock()
	b.sinks = append(b.sinks, conn.Handoff(ctx))
	b.mu.Unlock()
	conn.OnStateUpdate(ctx)(func(state []byte) {
		b.mu.Lock()
		same := b.current == string(state)
		b.current = string(state)
		b.mu.Unlock()
		if !same {
			b.applied <- string(state)
		}
	})
}

func (b *syncBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	b.register(ctx)
	return b.portableBackend.Open(ctx, general)
}

func (b *syncBackend) Resume(ctx context.Context, general conn.Stream, state []byte) (conn.Conn, error) {
	b.register(ctx)
	return b.portableBackend.Resume(ctx, general, state)
}

// change hands off state from the backend's newest connection.
func (b *syncBackend) change(state string) {
	b.mu.Lock()
	sink := b.sinks[len(b.sinks)-1]
	b.current = state
	b.mu.Unlock()
	sink([]byte(state))
}

// notApplied fails if b's connections were given a state.
func (b *syncBackend) notApplied(t *testing.T, who string) {
	t.Helper()
	select {
	case st := <-b.applied:
		t.Errorf("%s's connection was given %q", who, st)
	default:
	}
}

// heldOnBoth opens a session on replica a, has replica b resume it (a
// ping), and has a's connection hand off "level:debug", which b's
// connection must be given. It returns the session's id.
func heldOnBoth(t *testing.T, a, b *replica, store Cluster, ba, bb *syncBackend) string {
	t.Helper()
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool {
		rec, _, _ := store.State(context.Background(), sid)
		return rec != nil
	})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if resp, body := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618); resp.StatusCode != http.StatusOK {
		t.Fatalf("ping on b: %d %s", resp.StatusCode, body)
	}
	ba.change("level:debug")
	if st := testkit.Receive(t, bb.applied, "b's connection given a's change"); st != "level:debug" {
		t.Fatalf("b's connection was given %q, want level:debug", st)
	}
	return sid
}

// runCluster starts a Cluster of cfg (with setup applied before it runs),
// stopped at cleanup; the returned func stops it earlier.
func runCluster(t *testing.T, cfg cluster.Config, setup func(*cluster.Cluster)) (*cluster.Cluster, context.CancelFunc) {
	t.Helper()
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		c.Close()
	})
	return c, cancel
}

// TestHeldSessionGetsNewerState: two replicas hold one portable session
// (b resumed it). A change on a's connection is versioned, stored and
// announced; b, holding the session at the older version, fetches the
// state and gives it to its connection; a, which wrote it, gives its own
// connection nothing. A write older than the store's loses and is
// announced to nobody. While the store is down a change stays with the
// connection that made it; once the store is back (each replica's
// subscription in place again: Resync), a writes it again and b catches
// up.
func TestHeldSessionGetsNewerState(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	ba, bb := newSyncBackend(), newSyncBackend()
	a := startReplica(t, cl, "a", ring, ba)
	b := startReplica(t, cl, "b", ring, bb)
	cl.mu.Lock()
	cl.onState = append(cl.onState, a.h.StateChanged, b.h.StateChanged)
	cl.mu.Unlock()
	store := cl.replica("", "")
	ctx := context.Background()

	sid := heldOnBoth(t, a, b, store, ba, bb)
	_, v, _ := store.State(ctx, sid)
	if want := (session.StateVersion{N: 2, Tie: session.Tiebreak("a")}); v != want {
		t.Errorf("stored version %+v, want %+v (one past the first state, a's)", v, want)
	}
	if stored, err := store.SetState(ctx, sid, session.StateVersion{N: 1, Tie: ^uint64(0)}, handoffRecord(v0618, []byte("stale")), time.Now().Add(time.Hour)); stored || err != nil {
		t.Errorf("a write older than the store's: stored %v, %v", stored, err)
	}

	// A change made on b, which resumed the session at version 1 and was
	// given version 2: b's write is version 3, and reaches a.
	bb.change("level:error")
	if st := testkit.Receive(t, ba.applied, "a's connection given b's change"); st != "level:error" {
		t.Fatalf("a's connection was given %q, want level:error", st)
	}

	cl.mu.Lock()
	cl.down = true
	cl.mu.Unlock()
	ba.change("level:info")
	testkit.WaitFor(t, "a's failed write counted", func() bool { return a.h.Forwards().StoreErrors > 0 })
	cl.mu.Lock()
	cl.down = false
	cl.mu.Unlock()
	b.h.Resync()
	a.h.Resync()
	if st := testkit.Receive(t, bb.applied, "b's connection given the change made while the store was down"); st != "level:info" {
		t.Fatalf("b's connection was given %q, want level:info", st)
	}
	if rec, _, _ := store.State(ctx, sid); string(rec) != string(handoffRecord(v0618, []byte("level:info"))) {
		t.Errorf("stored after the store came back: %q", rec)
	}
	ba.notApplied(t, "a")
	bb.notApplied(t, "b")
}

// TestHeldSessionGetsNewerStateThroughRedis: the same through a real Redis
// and internal/cluster (its script keeps the newer state and publishes
// it; its subscriber tells the Handler): a change on one replica's
// connection reaches the connection the other holds.
func TestHeldSessionGetsNewerStateThroughRedis(t *testing.T) {
	addr := testkit.Redis(t)
	ring := testRing(t)
	subscribed := make(chan struct{}, 8)
	var clusters []*cluster.Cluster
	join := func(instance string) func(string) Cluster {
		return func(advertise string) Cluster {
			c, _ := runCluster(t, cluster.Config{Instance: instance, Advertise: advertise, RedisURL: "redis://" + addr + "/0",
				Heartbeat: 100 * time.Millisecond, Timeout: 5 * time.Second, Prefix: "statesync-" + t.Name() + ":"},
				func(c *cluster.Cluster) { c.OnSubscribed(func() { subscribed <- struct{}{} }) })
			clusters = append(clusters, c)
			return c
		}
	}
	ba, bb := newSyncBackend(), newSyncBackend()
	a := serveReplica(t, "", ring, ba, join("a"))
	b := serveReplica(t, "", ring, bb, join("b"))
	clusters[0].OnStateChange(a.h.StateChanged)
	clusters[1].OnStateChange(b.h.StateChanged)
	testkit.Receive(t, subscribed, "one replica subscribed")
	testkit.Receive(t, subscribed, "the other replica subscribed")

	heldOnBoth(t, a, b, clusters[1], ba, bb)
	bb.change("level:error")
	if st := testkit.Receive(t, ba.applied, "a's connection given b's change"); st != "level:error" {
		t.Fatalf("a's connection was given %q, want level:error", st)
	}
	ba.notApplied(t, "a")
	bb.notApplied(t, "b")
}

// slowSync is a syncBackend whose Resume waits for release, after telling
// entered, before its connection registers anything.
type slowSync struct {
	*syncBackend
	entered, release chan struct{}
}

func (b *slowSync) Resume(ctx context.Context, general conn.Stream, state []byte) (conn.Conn, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.syncBackend.Resume(ctx, general, state)
}

// TestResumedSessionCatchesUp: a newer state announced while a replica is
// resuming the session, before the backend registered its connection's
// apply function, is kept on the session and given to the connection
// once Resume returns.
func TestResumedSessionCatchesUp(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	ba := newSyncBackend()
	bb := &slowSync{syncBackend: newSyncBackend(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	a := startReplica(t, cl, "a", ring, ba)
	b := startReplica(t, cl, "b", ring, bb)
	cl.mu.Lock()
	cl.onState = append(cl.onState, a.h.StateChanged, b.h.StateChanged)
	cl.mu.Unlock()
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool {
		rec, _, _ := cl.replica("", "").State(context.Background(), sid)
		return rec != nil
	})
	pinged := make(chan int, 1)
	go func() {
		resp, _ := do(t, b.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
		pinged <- resp.StatusCode
	}()
	testkit.Receive(t, bb.entered, "b resuming the session")
	ba.change("level:debug")
	testkit.WaitFor(t, "b's session to take the newer state", func() bool {
		s := b.h.store.Lookup(sid)
		if s == nil {
			return false
		}
		state, _ := s.HandoffAt()
		return string(state) == "level:debug"
	})
	close(bb.release)
	if code := testkit.Receive(t, pinged, "the ping that resumed the session"); code != http.StatusOK {
		t.Fatalf("ping on b: %d", code)
	}
	if st := testkit.Receive(t, bb.applied, "b's connection given the state announced during its resume"); st != "level:debug" {
		t.Errorf("b's connection was given %q, want level:debug", st)
	}
}
