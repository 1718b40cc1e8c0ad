package front

import (
	"bytes"
	"context"
	"errors"
	"io"

	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/seal"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// memCluster is the store several replicas share, in memory: each
// replica gets a view of it (memCluster.replica) with its own instance.
type memCluster struct {
	mu       sync.Mutex
	state    map[string][]byte
	stateV   map[string]session.StateVersion
	onState  []func(string, session.StateVersion) // statesync_test.go
	down     bool                                 // SetState fails (statesync_test.go)
	revoked  map[string]bool
	dead     map[string]bool // instances without a heartbeat
	onRevoke []func(string)
	// sharedstreams_test.go:
	streams    map[memStreamKey]*memStream
	writes     int  // stream writes taken
	dropEvents bool // take OpenStream only, as a store whose queue is full
}

func newMemCluster() *memCluster {
	return &memCluster{state: map[string][]byte{}, stateV: map[string]session.StateVersion{}, revoked: map[string]bool{}, dead: map[string]bool{}, streams: map[memStreamKey]*memStream{}}
}

type memReplica struct {
	*memCluster
	instance, advertise string
}

func (c *memCluster) replica(instance, advertise string) *memReplica {
	return &memReplica{memCluster: c, instance: instance, advertise: advertise}
}

func (r *memReplica) Instance() string  { return r.instance }
func (r *memReplica) Advertise() string { return r.advertise }
func (r *memReplica) Alive(instance string) (bool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.dead[instance], true
}
func (r *memReplica) SetState(_ context.Context, sid string, v session.StateVersion, rec []byte, _ time.Time) (bool, error) {
	r.mu.Lock()
	if r.down {
		r.mu.Unlock()
		return false, errors.New("store down")
	}
	if _, ok := r.state[sid]; ok && !v.Newer(r.stateV[sid]) {
		r.mu.Unlock()
		return false, nil
	}
	r.state[sid], r.stateV[sid] = bytes.Clone(rec), v
	subs := r.onState
	r.mu.Unlock()
	for _, f := range subs {
		f(sid, v)
	}
	return true, nil
}
func (r *memReplica) State(_ context.Context, sid string) ([]byte, session.StateVersion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state[sid], r.stateV[sid], nil
}
func (r *memReplica) Revoke(_ context.Context, sid string, _ time.Time) error {
	r.mu.Lock()
	r.revoked[sid] = true
	delete(r.state, sid)
	subs := r.onRevoke
	r.mu.Unlock()
	for _, f := range subs {
		f(sid)
	}
	return nil
}
func (r *memReplica) Revoked(_ context.Context, sid string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.revoked[sid], nil
}

// portableBackend is a fakeBackend whose sessions are portable: Open
// hands off "state:<n>", Resume takes it back.
type portableBackend struct {
	*fakeBackend
	mu      sync.Mutex
	resumed []string // the states Resume got
	opened  atomic.Int32
}

func (b *portableBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	n := b.opened.Add(1)
	conn.Handoff(ctx)([]byte("state:" + string(rune('0'+n))))
	return b.fakeBackend.Open(ctx, general)
}

func (b *portableBackend) Resume(_ context.Context, general conn.Stream, state []byte) (conn.Conn, error) {
	b.mu.Lock()
	b.resumed = append(b.resumed, string(state))
	b.mu.Unlock()
	c := &fakeConn{b: b.fakeBackend, general: general, held: make(chan struct{}, 64), version: "2025-06-18"}
	b.conns <- c
	return c, nil
}

func testRing(t *testing.T) *seal.Ring {
	t.Helper()
	r, err := seal.New([]seal.Key{{ID: "k1", Secret: bytes.Repeat([]byte{7}, seal.KeySize), Primary: true}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// replica is one Handler of a cluster, served on loopback.
type replica struct {
	h   *Handler
	srv *httptest.Server
	b   conn.Backend
}

// startReplica serves backend b as server "x" in a replica of cl named
// instance, sealing with ring.
func startReplica(t *testing.T, cl *memCluster, instance string, ring *seal.Ring, b conn.Backend) *replica {
	t.Helper()
	return startReplicaWith(t, cl, instance, ring, Config{Backends: map[string]conn.Backend{"x": b}}, nil)
}

// startReplicaWith is startReplica with more of the config (its Backends
// serve "x"), and the replica's view of cl wrapped by wrap when not nil.
func startReplicaWith(t *testing.T, cl *memCluster, instance string, ring *seal.Ring, cfg Config, wrap func(*memReplica) Cluster) *replica {
	t.Helper()
	r := serveReplicaWith(t, "", ring, cfg, func(advertise string) Cluster {
		m := cl.replica(instance, advertise)
		if wrap != nil {
			return wrap(m)
		}
		return m
	})
	cl.mu.Lock()
	cl.onRevoke = append(cl.onRevoke, r.h.Revoked)
	cl.mu.Unlock()
	return r
}

// serveReplica serves backend b as server "x" in a replica listening on
// addr ("": a free port) and sealing with ring, of the cluster join
// returns given the replica's address.
func serveReplica(t *testing.T, addr string, ring *seal.Ring, b conn.Backend, join func(advertise string) Cluster) *replica {
	t.Helper()
	return serveReplicaWith(t, addr, ring, Config{Backends: map[string]conn.Backend{"x": b}}, join)
}

// serveReplicaWith is serveReplica with more of the config.
func serveReplicaWith(t *testing.T, addr string, ring *seal.Ring, cfg Config, join func(advertise string) Cluster) *replica {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv.Listener.Close()
		srv.Listener = ln
	}
	cfg.Seal, cfg.Cluster = ring, join(srv.Listener.Addr().String())
	h := New(cfg)
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return &replica{h: h, srv: srv, b: cfg.Backends["x"]}
}

const v0618 = "2025-06-18"

// A sealed id: a random part first (ids differ where logs cut them), the
// claim after it, opened by every replica holding the keys and by none
// other; bound to its target.
func TestSealedSessionIDs(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, newFakeBackend())
	ids := map[string]bool{}
	for range 4 {
		id := initSession(t, a.srv)
		random, token, ok := strings.Cut(id, ".")
		if !ok || len(random) != randomPartLen || token == "" || ids[logID(id)] {
			t.Fatalf("id %q: not <random>.<claim>, or its logged prefix repeats", id)
		}
		ids[logID(id)] = true
		c, err := openID(ring, "x", id)
		if err != nil || c.instance != "a" || c.advertise != a.srv.Listener.Addr().String() || c.legacy || c.principal != principalHash("") {
			t.Fatalf("claim of %q: %+v, %v", id, c, err)
		}
		if _, err := openID(ring, "y", id); err == nil {
			t.Errorf("the claim opened for another target")
		}
		if _, err := openID(testRingOf(t, 8), "x", id); err == nil {
			t.Errorf("the claim opened with other keys")
		}
		// Another random part glued to the claim does not open.
		if _, err := openID(ring, "x", strings.Repeat("A", randomPartLen)+"."+token); err == nil {
			t.Errorf("the claim opened with another random part")
		}
	}
}

func testRingOf(t *testing.T, b byte) *seal.Ring {
	r, err := seal.New([]seal.Key{{ID: "k1", Secret: bytes.Repeat([]byte{b}, seal.KeySize), Primary: true}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// An owner-bound session's requests that land on another replica are
// answered by the owner, through one hop: a call, a DELETE; then the
// session is unknown everywhere.
func TestForwardToOwner(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	ba, bb := newFakeBackend(), newFakeBackend()
	a := startReplica(t, cl, "a", ring, ba)
	b := startReplica(t, cl, "b", ring, bb)
	sid := initSession(t, a.srv)
	resp, body := do(t, b.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"x-7","method":"echoParams","params":{"n":1}}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":"x-7"`) || !strings.Contains(body, `{"n":1}`) {
		t.Fatalf("forwarded call: %d %s", resp.StatusCode, body)
	}
	if ba.opens.Load() != 1 || bb.opens.Load() != 0 {
		t.Errorf("opens: owner %d, other %d; want 1, 0", ba.opens.Load(), bb.opens.Load())
	}
	if f := b.h.Forwards(); f.Forwarded != 1 {
		t.Errorf("forwards: %+v", f)
	}
	// A GET stream passes through too: its headers come at once.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+mcpPath, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", v0618)
	get, err := b.srv.Client().Do(req)
	if err != nil || get.StatusCode != http.StatusOK || get.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("forwarded GET: %v %v", get, err)
	}
	// b drains: the stream passing through it ends (its client opens it
	// again elsewhere), while a's sessions go on.
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, get.Body)
		ended <- err
	}()
	b.h.Drain()
	testkit.Receive(t, ended, "the end of a stream forwarded through b, at b's drain")
	cancel()
	get.Body.Close()

	resp, _ = do(t, b.srv, http.MethodDelete, mcpPath, "", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("forwarded DELETE: %d", resp.StatusCode)
	}
	for _, r := range []*replica{a, b} {
		resp, _ = do(t, r.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("after DELETE: %d, want 404", resp.StatusCode)
		}
	}
}

// The owner gone: 404 at once, whether the store says so (no heartbeat)
// or the owner cannot be dialled; never a hang, never a 5xx.
func TestOwnerGone(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, newFakeBackend())
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	sid := initSession(t, a.srv)
	sid2 := initSession(t, a.srv)
	a.srv.Close() // the owner's listener is gone: dials are refused

	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	resp, _ := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("owner unreachable: %d, want 404", resp.StatusCode)
	}
	cl.mu.Lock()
	cl.dead["a"] = true
	cl.mu.Unlock()
	resp, _ = do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid2, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("owner without heartbeat: %d, want 404", resp.StatusCode)
	}
	if f := b.h.Forwards(); f.Failed != 1 || f.Gone != 1 || f.Forwarded != 0 {
		t.Errorf("forwards: %+v, want one failed dial and one gone", f)
	}
}

// A hop header a client made is refused; a real hop to a replica that
// does not hold the session is not forwarded again.
func TestHopHeader(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, newFakeBackend())
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	sid := initSession(t, a.srv)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	forged := testRingOf(t, 9).Seal(hopPurpose, nil, time.Minute)
	for _, hop := range []string{"1", forged} {
		resp, _ := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618, hopHeader, hop)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("hop %q: %d, want 403", hop, resp.StatusCode)
		}
	}
	real := ring.Seal(hopPurpose, nil, time.Minute)
	resp, _ := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618, hopHeader, real)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a hop to a replica without the session: %d, want 404", resp.StatusCode)
	}
	// At its owner, a hop is served.
	resp, _ = do(t, a.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618, hopHeader, real)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a hop to the owner: %d, want 200", resp.StatusCode)
	}
	if f := b.h.Forwards(); f.Forwarded != 0 {
		t.Errorf("forwards: %+v, want none", f)
	}
}

// Another principal's session id, or one of another target, is unknown
// to a replica that does not hold it, as it is to the owner.
func TestForeignIDsAreUnknown(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, newFakeBackend())
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	sid := initSession(t, a.srv)
	// Minted for principal "alice": a request without her credentials.
	alice, err := mintID(ring, cl.replica("a", a.srv.Listener.Addr().String()), "x", "bearer\x00alice", false, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	random, token, _ := strings.Cut(sid, ".")
	for _, id := range []string{alice, random + "x." + token, sid + "A", "not-sealed"} {
		resp, _ := do(t, b.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", id, "Mcp-Protocol-Version", v0618)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("id %q: %d, want 404", id, resp.StatusCode)
		}
	}
	if f := b.h.Forwards(); f.Forwarded != 0 {
		t.Errorf("forwards: %+v, want none", f)
	}
}

// A portable session is resumed by the replica a request lands on, from
// its handoff record, once however many requests race for it; a DELETE
// on any replica ends it on all.
func TestResumePortable(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	pa, pb := &portableBackend{fakeBackend: newFakeBackend()}, &portableBackend{fakeBackend: newFakeBackend()}
	a := startReplica(t, cl, "a", ring, pa)
	b := startReplica(t, cl, "b", ring, pb)
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := `"r` + string(rune('0'+i)) + `"`
			resp, body := do(t, b.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":`+id) {
				t.Errorf("call on the other replica: %d %s", resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	pb.mu.Lock()
	got := strings.Join(pb.resumed, ",")
	pb.mu.Unlock()
	if got != "state:1" || pb.opened.Load() != 0 {
		t.Fatalf("resumed %q (opened %d), want one resume from state:1", got, pb.opened.Load())
	}
	if f := b.h.Forwards(); f.Resumed != 1 || f.Forwarded != 0 {
		t.Errorf("forwards: %+v", f)
	}
	resp, _ := do(t, b.srv, http.MethodDelete, mcpPath, "", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	for _, r := range []*replica{a, b} {
		testkit.WaitFor(t, "the session ended on every replica", func() bool { return r.h.Sessions() == 0 })
		resp, _ = do(t, r.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("after DELETE: %d, want 404", resp.StatusCode)
		}
	}
}

func FuzzParseClaim(f *testing.F) {
	f.Add((&claim{created: time.Unix(1, 0), instance: "a", advertise: "10.0.0.1:8080"}).marshal())
	f.Add((&claim{legacy: true}).marshal())
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseClaim(b)
		if err != nil {
			return
		}
		if again := c.marshal(); !bytes.Equal(again, b) {
			t.Fatalf("claim %x parsed to %+v, which marshals to %x", b, c, again)
		}
	})
}

func FuzzParseHandoffRecord(f *testing.F) {
	f.Add(handoffRecord("2025-06-18", []byte("state")))
	f.Add([]byte{0})
	f.Add([]byte{200, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, state, ok := parseHandoffRecord(b)
		if !ok {
			return
		}
		if again := handoffRecord(v, state); !bytes.Equal(again, b) {
			t.Fatalf("record %x parsed to %q %q, which marshals to %x", b, v, state, again)
		}
	})
}

// A portable session's standalone stream is served at the replica that
// opened it, while it lives, even by a replica that resumed the session:
// the server's own messages arrive there. Once it is gone, the replica
// the GET lands on serves the stream itself.
func TestPortableStandaloneStreamAtOwner(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	pa, pb := &portableBackend{fakeBackend: newFakeBackend()}, &portableBackend{fakeBackend: newFakeBackend()}
	a := startReplica(t, cl, "a", ring, pa)
	b := startReplica(t, cl, "b", ring, pb)
	sid := initSession(t, a.srv)
	ca := <-pa.conns
	testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })
	resp, _ := do(t, b.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusOK || b.h.Sessions() != 1 {
		t.Fatalf("resume on b: %d, %d sessions", resp.StatusCode, b.h.Sessions())
	}

	get := func(srv *httptest.Server) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+mcpPath, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", v0618)
		resp, err := srv.Client().Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET: %v %v", resp, err)
		}
		return resp, cancel
	}
	resp, cancel := get(b.srv)
	if f := b.h.Forwards(); f.Forwarded != 1 {
		t.Errorf("the GET on b was not forwarded to a: %+v", f)
	}
	// A message of a's connection (the server's own) reaches the client
	// through b.
	testkit.WaitFor(t, "a's stream attached", func() bool {
		ca.general.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"from a"}}`))
		return true
	})
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "from a") {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("the stream through b ended before a's message: %v (%q)", err, got.String())
		}
	}
	cancel()
	resp.Body.Close()

	// a gone: b serves the stream itself.
	a.srv.Close()
	resp, cancel = get(b.srv)
	cancel()
	resp.Body.Close()
	if f := b.h.Forwards(); f.Forwarded != 1 || f.Failed != 1 {
		t.Errorf("with a gone: %+v, want the stream served by b after one failed dial", f)
	}
}
