package front

import (
	"context"
	"net/http"
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
	testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })

	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for i := range 2 {
		resp, body := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("request %d on b for a session deleted as b resumed it: %d %s, want 404", i, resp.StatusCode, body)
		}
	}
	testkit.WaitFor(t, "no session left on either replica", func() bool { return a.h.Sessions() == 0 && b.h.Sessions() == 0 })
}
