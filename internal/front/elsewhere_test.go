package front

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// revokedMeanwhile is a replica's view of the store on which a session is
// revoked (a DELETE on another replica) just after this replica asked
// whether it was: the answer it got is already stale.
type revokedMeanwhile struct {
	*memReplica
	once sync.Once
}

func (r *revokedMeanwhile) Revoked(ctx context.Context, sid string) (bool, error) {
	revoked, err := r.memReplica.Revoked(ctx, sid)
	r.once.Do(func() {
		_ = r.memReplica.Revoke(ctx, sid, time.Now().Add(time.Hour))
	})
	return revoked, err
}

// A portable session deleted on one replica while another is resuming it
// stays deleted: the replica that resumes it does not serve it, then or
// later, whichever of the resume and the revocation comes first.
func TestResumeRacingRevoke(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	pa, pb := &portableBackend{fakeBackend: newFakeBackend()}, &portableBackend{fakeBackend: newFakeBackend()}
	a := startReplica(t, cl, "a", ring, pa)
	b := startReplicaWith(t, cl, "b", ring, Config{Backends: map[string]conn.Backend{"x": pb}},
		func(m *memReplica) Cluster { return &revokedMeanwhile{memReplica: m} })
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })

	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for i := range 2 {
		resp, body := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("request %d on b for a session deleted as b resumed it: %d %s, want 404", i, resp.StatusCode, body)
		}
	}
	testkit.WaitFor(t, "no session left on either replica", func() bool { return a.h.Sessions() == 0 && b.h.Sessions() == 0 })
}

// slowResume is a portableBackend whose Resume waits for release, after
// telling entered.
type slowResume struct {
	*portableBackend
	entered, release chan struct{}
}

func (b *slowResume) Resume(ctx context.Context, general conn.Stream, state []byte) (conn.Conn, error) {
	close(b.entered)
	<-b.release
	return b.portableBackend.Resume(ctx, general, state)
}

// Requests for a portable session that come while this replica resumes
// it (the session in its directory, its connection not yet there) wait
// for the resume: a call is answered, and a DELETE ends the session on
// every replica, as they would once it is resumed; neither is told the
// session is unknown (its client would initialize again).
func TestRequestsDuringResume(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			ring, cl := testRing(t), newMemCluster()
			pa := &portableBackend{fakeBackend: newFakeBackend()}
			pb := &slowResume{portableBackend: &portableBackend{fakeBackend: newFakeBackend()}, entered: make(chan struct{}), release: make(chan struct{})}
			a := startReplica(t, cl, "a", ring, pa)
			b := startReplica(t, cl, "b", ring, pb)
			sid := initSession(t, a.srv)
			testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })

			first := postAsync(t, b.srv, sid, v0618, `{"jsonrpc":"2.0","id":"first","method":"ping"}`)
			testkit.Receive(t, pb.entered, "the resume on b")
			second := make(chan *http.Response, 1)
			go func() {
				body := `{"jsonrpc":"2.0","id":"second","method":"ping"}`
				if method == http.MethodDelete {
					body = ""
				}
				resp, _ := do(t, b.srv, method, mcpPath, body, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
				second <- resp
			}()
			// The second request must come during the resume: it waits
			// for it, so the resume is let go only once the request is in
			// b's handler (counted by its requests).
			testkit.WaitFor(t, "the second request in b", func() bool { return b.h.requests.Load() == 2 })
			close(pb.release)
			got := testkit.Receive(t, first, "the first call")
			// (Racing a DELETE of its session, it may find the session
			// ended: 404.)
			if !strings.HasPrefix(got, "200") && !(method == http.MethodDelete && strings.HasPrefix(got, "404")) || strings.HasPrefix(got, "200") && !strings.Contains(got, `"id":"first"`) {
				t.Errorf("the call that resumed the session: %s", got)
			}
			resp := testkit.Receive(t, second, "the request during the resume")
			want := http.StatusOK
			if method == http.MethodDelete {
				want = http.StatusNoContent
			}
			if resp.StatusCode != want {
				t.Fatalf("%s during the resume: %d, want %d", method, resp.StatusCode, want)
			}
			if method == http.MethodDelete {
				testkit.WaitFor(t, "the session ended on every replica", func() bool { return a.h.Sessions() == 0 && b.h.Sessions() == 0 })
			}
		})
	}
}

// A portable session whose handoff record the store lost (Redis restarted
// empty, with no persistence) gets it back from the replica that holds
// it, the first time another replica, finding no record, forwards it a
// request: it is portable again, and survives that replica.
func TestHandoffRecordRestored(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	pa, pb := &portableBackend{fakeBackend: newFakeBackend()}, &portableBackend{fakeBackend: newFakeBackend()}
	a := startReplica(t, cl, "a", ring, pa)
	b := startReplica(t, cl, "b", ring, pb)
	sid := initSession(t, a.srv)
	stored := func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil }
	testkit.WaitFor(t, "the handoff record stored", stored)
	cl.mu.Lock()
	clear(cl.state) // the store restarted empty
	cl.mu.Unlock()

	if code := callStatus(t, b.srv, sid); code != http.StatusOK {
		t.Fatalf("a call on b with no record: %d", code)
	}
	if f := b.h.Forwards(); f.Forwarded != 1 || f.Resumed != 0 {
		t.Fatalf("forwards: %+v, want the call forwarded to a", f)
	}
	testkit.WaitFor(t, "the handoff record stored again", stored)

	a.srv.Close() // a gone: b resumes the session from the record
	cl.mu.Lock()
	cl.dead["a"] = true
	cl.mu.Unlock()
	if code := callStatus(t, b.srv, sid); code != http.StatusOK {
		t.Errorf("a call on b once a is gone: %d, want 200", code)
	}
}
