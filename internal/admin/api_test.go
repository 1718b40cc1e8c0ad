package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// With a cluster: the summary names the replica answering and counts the
// live ones; each session says which replica opened it and whether it is
// portable; ending one another replica holds maps its outcomes to
// statuses, and the whole id reaches the Source.
func TestClusterAPI(t *testing.T) {
	here := Replica{Instance: "pod-a", Advertise: "10.0.0.1:8080", Self: true}
	src := &fakeSource{
		cluster: &Cluster{Replica: here, LiveReplicas: 3, Redis: "up"},
		sessions: []Session{
			{ID: "aaaaaaaa", Target: "echo", Owner: &here},
			{ID: "bbbbbbbb", Target: "remote", Portable: true, Owner: &Replica{Instance: "pod-b", Advertise: "10.0.0.2:8080"}},
		},
	}
	h := New(Config{Source: src, Token: token})
	var sum Summary
	if w := do(t, h, "GET", "/admin/summary", token); w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &sum) != nil {
		t.Fatalf("summary: %d %s", w.Code, w.Body)
	}
	if sum.Cluster == nil || sum.Cluster.Instance != "pod-a" || sum.Cluster.Advertise != "10.0.0.1:8080" || sum.Cluster.LiveReplicas != 3 || sum.Cluster.Redis != "up" {
		t.Errorf("summary's cluster: %+v", sum.Cluster)
	}
	w := do(t, h, "GET", "/admin/sessions", token)
	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &list) != nil || len(list.Sessions) != 2 {
		t.Fatalf("sessions: %d %s", w.Code, w.Body)
	}
	byID := map[string]map[string]any{}
	for _, s := range list.Sessions {
		byID[s["id"].(string)] = s
	}
	if a := byID["aaaaaaaa"]; fmt.Sprint(a["owner"]) != "map[advertise:10.0.0.1:8080 instance:pod-a self:true]" || a["portable"] != false {
		t.Errorf("the session opened here: %v", a)
	}
	if b := byID["bbbbbbbb"]; fmt.Sprint(b["owner"]) != "map[advertise:10.0.0.2:8080 instance:pod-b self:false]" || b["portable"] != true {
		t.Errorf("the session opened on pod-b: %v", b)
	}

	whole := strings.Repeat("A", 22) + ".v1.k1.sealed"
	for _, c := range []struct {
		endErr error
		want   int
		says   string
	}{
		{nil, http.StatusOK, `"id"`},
		{fmt.Errorf("%w: gone", ErrOwnerGone), http.StatusNotFound, "is gone"},
		{fmt.Errorf("%w: dial refused", ErrOwnerUnreachable), http.StatusBadGateway, "did not answer"},
		{ErrNotFound, http.StatusNotFound, "needs its whole id"},
	} {
		src.endErr = c.endErr
		w := do(t, h, "DELETE", "/admin/sessions/"+whole, token)
		if w.Code != c.want || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("DELETE with %v: %d %s, want %d saying %q", c.endErr, w.Code, w.Body, c.want, c.says)
		}
		if src.ended != whole {
			t.Errorf("the Source was asked to end %q, want the whole id", src.ended)
		}
	}

	// With one replica: no cluster in the summary, and a 404 does not
	// speak of other replicas.
	src.cluster, src.endErr = nil, ErrNotFound
	if w := do(t, h, "GET", "/admin/summary", token); strings.Contains(w.Body.String(), "cluster") {
		t.Errorf("summary with one replica: %s", w.Body)
	}
	if w := do(t, h, "DELETE", "/admin/sessions/zzzz", token); w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "replica") {
		t.Errorf("DELETE with one replica: %d %s", w.Code, w.Body)
	}
}
