package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file checks the operations of a cluster on real replicas: each
// one's /metrics names it, and its admin API tells which replica owns a
// session and ends a session from any replica.

const clusterAdminToken = "cluster-admin-token-0123456789"

// opsDo sends method path to replica r directly, with the admin token,
// and returns the status and body.
func opsDo(t *testing.T, method string, r *gatewayReplica, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+clusterAdminToken)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, r.name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// opsSession is a session as the admin API lists it.
type opsSession struct {
	ID       string `json:"id"`
	Target   string `json:"target"`
	Portable bool   `json:"portable"`
	EndedOn  string `json:"endedOn"`
	Owner    *struct {
		Instance  string `json:"instance"`
		Advertise string `json:"advertise"`
		Self      bool   `json:"self"`
	} `json:"owner"`
}

// listedOn returns session sid as replica r lists it (false: not listed).
func listedOn(t *testing.T, r *gatewayReplica, sid string) (opsSession, bool) {
	t.Helper()
	code, body := opsDo(t, http.MethodGet, r, "/admin/sessions")
	var list struct{ Sessions []opsSession }
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
		t.Fatalf("GET /admin/sessions on %s: %d %s", r.name, code, body)
	}
	for _, s := range list.Sessions {
		if s.ID == sid[:8] {
			return s, true
		}
	}
	return opsSession{}, false
}

// endOn ends session sid by its whole id on replica r.
func endOn(t *testing.T, r *gatewayReplica, sid string) opsSession {
	t.Helper()
	code, body := opsDo(t, http.MethodDelete, r, "/admin/sessions/"+url.PathEscape(sid))
	var ended struct{ Ended opsSession }
	if code != http.StatusOK || json.Unmarshal(body, &ended) != nil {
		t.Fatalf("DELETE of session %s on %s: %d %s", sid[:8], r.name, code, body)
	}
	return ended.Ended
}

// TestClusterOps: three replicas on a real Redis. Each one's /metrics
// names it and counts the three live; a portable session opened on r0 and
// served once by r1 is listed by r1 with owner r0; r2 ends an owner-bound
// session of r0 (r0 ends it) and the portable one (revoked everywhere),
// each by its whole id, and their clients' next calls fail.
func TestClusterOps(t *testing.T) {
	_, _, replicas, _ := startCluster(t, 3, map[string]any{"metrics": true, "admin": map[string]any{"token": clusterAdminToken}})
	r0, r1, r2 := replicas[0], replicas[1], replicas[2]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, r := range replicas {
		info := fmt.Sprintf(`mcpgate_cluster_info{advertise=%q,replica=%q} 1`, r.addr, r.name)
		var body []byte
		testkit.WaitFor(t, r.name+"'s metrics to name it and see three live replicas", func() bool {
			var code int
			code, body = opsDo(t, http.MethodGet, r, "/metrics")
			return code == http.StatusOK && strings.Contains(string(body), info) &&
				strings.Contains(string(body), "\nmcpgate_cluster_live_replicas 3\n") &&
				strings.Contains(string(body), "\nmcpgate_cluster_redis_up 1\n")
		})
	}

	// A portable session opened on r0, one call of it served by r1.
	remote := connectSDK(t, ctx, "http://"+r0.addr+"/servers/remote/mcp", "2025-06-18")
	remoteID := remote.cs.ID()
	portable := &clusterClient{server: "remote", c: remote, sid: remoteID}
	// r0 stores the session's handoff record in Redis once initialize is answered, off the
	// client's path: a ping that reaches r1 before it lands is forwarded to r0 (served all
	// the same), and the next one resumes the session on r1.
	var s opsSession
	ok := false
	testkit.WaitFor(t, "r1 to resume r0's portable session", func() bool {
		if code := pingOn(t, r1, "remote", remoteID); code != http.StatusOK {
			t.Fatalf("a ping of r0's portable session on r1: %d", code)
		}
		s, ok = listedOn(t, r1, remoteID)
		return ok
	})
	if !ok || s.Owner == nil || s.Owner.Instance != "r0" || s.Owner.Advertise != r0.addr || s.Owner.Self || !s.Portable {
		t.Errorf("r1 lists r0's portable session as %+v (listed %v), want owner r0, portable", s, ok)
	}
	if s, ok := listedOn(t, r0, remoteID); !ok || s.Owner == nil || !s.Owner.Self {
		t.Errorf("r0 lists its own session as %+v (listed %v), want owner itself", s, ok)
	}
	if _, ok := listedOn(t, r2, remoteID); ok {
		t.Errorf("r2 lists a session it never served")
	}

	// An owner-bound session of r0, ended from r2.
	echo := &clusterClient{server: "echo", c: connectSDK(t, ctx, "http://"+r0.addr+"/servers/echo/mcp", "2025-06-18")}
	echo.sid = echo.c.cs.ID()
	if ok, what := echo.call(ctx, "before"); !ok {
		t.Fatalf("echo call before the end: %s", what)
	}
	if code, _ := opsDo(t, http.MethodDelete, r2, "/admin/sessions/"+echo.sid[:8]); code != http.StatusNotFound {
		t.Errorf("DELETE on r2 of a prefix of r0's session: %d, want 404", code)
	}
	ended := endOn(t, r2, echo.sid)
	if ended.EndedOn != "owner" || ended.Owner == nil || ended.Owner.Instance != "r0" || ended.Portable || ended.Target != "echo" {
		t.Errorf("ended on r2: %+v, want ended by its owner r0", ended)
	}
	if _, ok := listedOn(t, r0, echo.sid); ok {
		t.Errorf("r0 still lists the session r2 ended")
	}
	if ok, what := echo.call(ctx, "after"); ok {
		t.Errorf("an echo call after the end succeeded: %s", what)
	}

	// The portable session, revoked from r2: r0 and r1 drop it.
	if ended := endOn(t, r2, remoteID); ended.EndedOn != "cluster" || !ended.Portable || ended.Owner == nil || ended.Owner.Instance != "r0" {
		t.Errorf("ended on r2: %+v, want revoked on every replica", ended)
	}
	for _, r := range []*gatewayReplica{r0, r1} {
		testkit.WaitFor(t, r.name+" to drop the revoked session", func() bool { _, ok := listedOn(t, r, remoteID); return !ok })
	}
	if ok, what := portable.call(ctx, "after"); ok {
		t.Errorf("a call of the revoked session succeeded: %s", what)
	}
	if code := pingOn(t, r2, "remote", remoteID); code != http.StatusNotFound {
		t.Errorf("a ping of the revoked session on r2: %d, want 404", code)
	}
}

// pingOn POSTs a ping in session sid of server to replica r directly and
// returns the status.
func pingOn(t *testing.T, r *gatewayReplica, server, sid string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/servers/"+server+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":"ops-1","method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("ping on %s: %v", r.name, err)
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return resp.StatusCode
}
