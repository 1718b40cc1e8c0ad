package front

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// adminRequest is the administrator's request EndSession is given.
func adminRequest() *http.Request {
	return httptest.NewRequest(http.MethodDelete, "/admin/sessions/x", nil)
}

// listed returns the session of h's list whose id prefix is sid's.
func listed(t *testing.T, h *Handler, sid string) SessionInfo {
	t.Helper()
	for _, si := range h.SessionList(time.Now()) {
		if si.IDPrefix == logID(sid) {
			return si
		}
	}
	t.Fatalf("session %s is not listed", logID(sid))
	return SessionInfo{}
}

// callStatus is the status of a ping in session sid on srv.
func callStatus(t *testing.T, srv *httptest.Server, sid string) int {
	t.Helper()
	resp, _ := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	return resp.StatusCode
}

// The session list says which replica opened each session (this one
// marked) and whether it is portable: a portable session resumed on
// another replica is listed there with its first owner.
func TestSessionListOwner(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, &portableBackend{fakeBackend: newFakeBackend()})
	b := startReplica(t, cl, "b", ring, &portableBackend{fakeBackend: newFakeBackend()})
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })
	if code := callStatus(t, b.srv, sid); code != http.StatusOK {
		t.Fatalf("call on the other replica: %d", code)
	}
	aAddr := a.srv.Listener.Addr().String()
	if si := listed(t, a.h, sid); si.Owner == nil || *si.Owner != (Replica{Instance: "a", Advertise: aAddr, Self: true}) || !si.Portable {
		t.Errorf("on its owner: owner %+v, portable %v", si.Owner, si.Portable)
	}
	if si := listed(t, b.h, sid); si.Owner == nil || *si.Owner != (Replica{Instance: "a", Advertise: aAddr}) || !si.Portable {
		t.Errorf("on the replica that resumed it: owner %+v, portable %v", si.Owner, si.Portable)
	}

	// An owner-bound session is not portable; without a cluster there is
	// no owner.
	c := startReplica(t, cl, "c", ring, newFakeBackend())
	if si := listed(t, c.h, initSession(t, c.srv)); si.Portable || si.Owner == nil || !si.Owner.Self {
		t.Errorf("owner-bound: owner %+v, portable %v", si.Owner, si.Portable)
	}
	h, srv := testServer(t, newFakeBackend(), Config{})
	if si := listed(t, h, initSession(t, srv)); si.Owner != nil || si.Portable {
		t.Errorf("without a cluster: owner %+v, portable %v", si.Owner, si.Portable)
	}
}

// Ending an owner-bound session from a replica that does not hold it: its
// owner ends it, given the whole id; a prefix is only this replica's. With
// its owner gone: ErrOwnerGone; with its owner not answering:
// ErrOwnerUnreachable.
func TestEndSessionOnOwner(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, newFakeBackend())
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	sid := initSession(t, a.srv)
	if _, err := b.h.EndSession(adminRequest(), sid[:8]); !errors.Is(err, ErrSessionUnknown) {
		t.Errorf("a prefix of another replica's session: %v, want ErrSessionUnknown", err)
	}
	si, err := b.h.EndSession(adminRequest(), sid)
	if err != nil || si.EndedOn != EndedByOwner || si.Owner == nil || si.Owner.Instance != "a" || si.Owner.Self || si.Target != "x" || si.IDPrefix != logID(sid) {
		t.Fatalf("ended from b: %+v, %v", si, err)
	}
	if a.h.Sessions() != 0 {
		t.Errorf("the owner still holds %d sessions", a.h.Sessions())
	}
	for _, r := range []*replica{a, b} {
		if code := callStatus(t, r.srv, sid); code != http.StatusNotFound {
			t.Errorf("a call after the end: %d, want 404", code)
		}
	}
	if _, err := b.h.EndSession(adminRequest(), sid); !errors.Is(err, ErrSessionUnknown) {
		t.Errorf("ending it again: %v, want ErrSessionUnknown", err)
	}

	sid2 := initSession(t, a.srv)
	cl.mu.Lock()
	cl.dead["a"] = true
	cl.mu.Unlock()
	if _, err := b.h.EndSession(adminRequest(), sid2); !errors.Is(err, ErrOwnerGone) {
		t.Errorf("owner without a heartbeat: %v, want ErrOwnerGone", err)
	}
	cl.mu.Lock()
	cl.dead["a"] = false
	cl.mu.Unlock()
	a.srv.Close()
	if _, err := b.h.EndSession(adminRequest(), sid2); !errors.Is(err, ErrOwnerUnreachable) {
		t.Errorf("owner not answering: %v, want ErrOwnerUnreachable", err)
	}
}

// Ending a portable session from a replica that does not hold it revokes
// it: every replica holding it drops it, none resumes it. Ending one held
// here revokes it on the others too.
func TestEndSessionPortable(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, &portableBackend{fakeBackend: newFakeBackend()})
	b := startReplica(t, cl, "b", ring, &portableBackend{fakeBackend: newFakeBackend()})
	c := startReplica(t, cl, "c", ring, &portableBackend{fakeBackend: newFakeBackend()})
	stored := func(sid string) func() bool {
		return func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil }
	}

	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", stored(sid))
	if code := callStatus(t, b.srv, sid); code != http.StatusOK {
		t.Fatalf("call on b: %d", code)
	}
	si, err := c.h.EndSession(adminRequest(), sid)
	if err != nil || si.EndedOn != EndedEverywhere || !si.Portable || si.Owner == nil || si.Owner.Instance != "a" || si.Version != v0618 {
		t.Fatalf("ended from c: %+v, %v", si, err)
	}
	for _, r := range []*replica{a, b, c} {
		if r.h.store.Lookup(sid) != nil {
			t.Errorf("a replica still holds the revoked session")
		}
		if code := callStatus(t, r.srv, sid); code != http.StatusNotFound {
			t.Errorf("a call after the revocation: %d, want 404", code)
		}
	}

	sid2 := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", stored(sid2))
	if code := callStatus(t, b.srv, sid2); code != http.StatusOK {
		t.Fatalf("call on b: %d", code)
	}
	if si, err := a.h.EndSession(adminRequest(), sid2[:8]); err != nil || si.EndedOn != EndedHere {
		t.Fatalf("ended on a by prefix: %+v, %v", si, err)
	}
	if b.h.store.Lookup(sid2) != nil {
		t.Errorf("b still holds the session a ended")
	}
	if code := callStatus(t, c.srv, sid2); code != http.StatusNotFound {
		t.Errorf("c resumed a session ended on a: %d", code)
	}
}

// The owner's side: only a token sealed for that very session by this
// cluster's keys opens it.
func TestServeEndSessionToken(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, newFakeBackend())
	sid, other := initSession(t, a.srv), initSession(t, a.srv)
	for _, c := range []struct {
		name, body, token string
		want              int
	}{
		{"no token", sid, "", http.StatusForbidden},
		{"a client's hop token", sid, ring.Seal(hopPurpose, nil, hopTTL), http.StatusForbidden},
		{"another session's token", sid, ring.Seal(endSessionPurpose+other, nil, hopTTL), http.StatusForbidden},
		{"other keys", sid, testRingOf(t, 9).Seal(endSessionPurpose+sid, nil, hopTTL), http.StatusForbidden},
		{"no id", "", ring.Seal(endSessionPurpose, nil, hopTTL), http.StatusBadRequest},
		{"an unknown session", "nope", ring.Seal(endSessionPurpose+"nope", nil, hopTTL), http.StatusNotFound},
		{"its own token", sid, ring.Seal(endSessionPurpose+sid, nil, hopTTL), http.StatusOK},
	} {
		hdr := []string{}
		if c.token != "" {
			hdr = []string{hopHeader, c.token}
		}
		resp, body := do(t, a.srv, http.MethodPost, endSessionPath, c.body, hdr...)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.want)
		}
		if c.want == http.StatusOK && !strings.Contains(body, `"endedOn":"here"`) {
			t.Errorf("%s: %s", c.name, body)
		}
	}
	if a.h.store.Lookup(sid) != nil || a.h.store.Lookup(other) == nil {
		t.Errorf("not just the session named was ended")
	}
}

// The owner ends a session at another replica's request whatever Host
// the administrator reached that replica's admin API by: the admin
// listener is not the main one, and its names need not be among those
// the main listener's Host check allows (gateway.allowedHosts). The
// request's sealed token is what admits it.
func TestEndSessionOnOwnerBehindHostCheck(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	allowed := func(host string) bool { return host == "127.0.0.1" || host == "mcp.example.com" }
	start := func(instance string) *replica {
		return startReplicaWith(t, cl, instance, ring, Config{Backends: map[string]conn.Backend{"x": newFakeBackend()}, HostAllowed: allowed}, nil)
	}
	a, b := start("a"), start("b")
	sid := initSession(t, a.srv)
	admin := adminRequest()
	admin.Host = "mcpgate-admin.ops.svc:9090"
	if si, err := b.h.EndSession(admin, sid); err != nil || si.EndedOn != EndedByOwner {
		t.Fatalf("ended from b, its admin API reached as %s: %+v, %v", admin.Host, si, err)
	}
	if a.h.Sessions() != 0 {
		t.Errorf("the owner still holds %d sessions", a.h.Sessions())
	}
}
