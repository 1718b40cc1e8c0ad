package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// fakeAuthServer is an AuthServer over two maps; down makes every call
// fail.
type fakeAuthServer struct {
	mu      sync.Mutex
	clients map[string]bool
	grants  map[string]string // id -> client
	down    bool
}

func (f *fakeAuthServer) list(kind string) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errors.New("redis: connection refused")
	}
	var out []map[string]string
	if kind == "clients" {
		for id := range f.clients {
			out = append(out, map[string]string{"id": id})
		}
	} else {
		for id, c := range f.grants {
			out = append(out, map[string]string{"id": id, "clientId": c})
		}
	}
	return json.Marshal(out)
}

func (f *fakeAuthServer) AdminClients(context.Context) (json.RawMessage, error) {
	return f.list("clients")
}
func (f *fakeAuthServer) AdminGrants(context.Context) (json.RawMessage, error) {
	return f.list("grants")
}
func (f *fakeAuthServer) AdminRevokeGrant(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, errors.New("redis: connection refused")
	}
	_, ok := f.grants[id]
	delete(f.grants, id)
	return ok, nil
}
func (f *fakeAuthServer) AdminDeleteClient(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := f.clients[id]
	delete(f.clients, id)
	for g, c := range f.grants {
		if c == id {
			delete(f.grants, g)
		}
	}
	return ok, nil
}

// The authorization server's clients and grants: listed, a grant
// revoked, a client (its id an URL, escaped in the path) deleted with its
// grants; unknown ids 404; a failing store 503; nothing without admin
// credentials or from another origin; 404 everywhere when the gateway
// has no authorization server.
func TestOAuthAPI(t *testing.T) {
	const doc = "https://app.example/client.json"
	as := &fakeAuthServer{clients: map[string]bool{"c1": true, doc: true}, grants: map[string]string{"g1": "c1", "g2": doc}}
	h := New(Config{Source: &fakeSource{}, Token: token, AuthServer: as})

	var sum Summary
	if w := do(t, h, "GET", "/admin/summary", token); json.Unmarshal(w.Body.Bytes(), &sum) != nil || !sum.AuthServer {
		t.Errorf("summary does not say there is an authorization server: %s", w.Body)
	}
	var lists struct {
		Clients []map[string]string `json:"clients"`
		Grants  []map[string]string `json:"grants"`
	}
	for _, path := range []string{"/admin/oauth/clients", "/admin/oauth/grants"} {
		w := do(t, h, "GET", path, token)
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &lists) != nil {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
	}
	if len(lists.Clients) != 2 || len(lists.Grants) != 2 {
		t.Fatalf("lists: %+v", lists)
	}

	for _, c := range []struct {
		method, path, bearer string
		hdr                  []string
		want                 int
		says                 string
	}{
		{"GET", "/admin/oauth/grants", "", nil, http.StatusUnauthorized, "credentials"},
		{"DELETE", "/admin/oauth/grants/g1", "", nil, http.StatusUnauthorized, "credentials"},
		{"DELETE", "/admin/oauth/grants/g1", token, []string{"Origin", "https://evil.example"}, http.StatusForbidden, "cross-origin"},
		{"DELETE", "/admin/oauth/grants/g1", token, nil, http.StatusOK, `"revoked": "g1"`},
		{"DELETE", "/admin/oauth/grants/g1", token, nil, http.StatusNotFound, `no grant \"g1\"`},
		{"DELETE", "/admin/oauth/clients/" + strings.ReplaceAll(strings.ReplaceAll(doc, ":", "%3A"), "/", "%2F"), token, nil, http.StatusOK, `"deleted": "` + doc + `"`},
		{"DELETE", "/admin/oauth/clients/nobody", token, nil, http.StatusNotFound, `no client \"nobody\"`},
		{"POST", "/admin/oauth/grants/g1", token, nil, http.StatusNotFound, "nothing at POST"},
	} {
		w := do(t, h, c.method, c.path, c.bearer, c.hdr...)
		if w.Code != c.want || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("%s %s: %d %s, want %d saying %s", c.method, c.path, w.Code, w.Body, c.want, c.says)
		}
	}
	if w := do(t, h, "GET", "/admin/oauth/grants", token); !strings.Contains(w.Body.String(), `"grants": []`) {
		t.Errorf("grants after revoking g1 and deleting g2's client: %s", w.Body)
	}

	as.down = true
	for _, c := range []struct{ method, path string }{{"GET", "/admin/oauth/clients"}, {"DELETE", "/admin/oauth/grants/g9"}} {
		if w := do(t, h, c.method, c.path, token); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "connection refused") {
			t.Errorf("%s %s with the store down: %d %s", c.method, c.path, w.Code, w.Body)
		}
	}

	off := New(Config{Source: &fakeSource{}, Token: token})
	if w := do(t, off, "GET", "/admin/summary", token); strings.Contains(w.Body.String(), "authServer") {
		t.Errorf("summary without an authorization server: %s", w.Body)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/admin/oauth/clients"}, {"GET", "/admin/oauth/grants"}, {"DELETE", "/admin/oauth/grants/g1"}, {"DELETE", "/admin/oauth/clients/c1"}} {
		if w := do(t, off, c.method, c.path, token); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "gateway.auth.server") {
			t.Errorf("%s %s without an authorization server: %d %s", c.method, c.path, w.Code, w.Body)
		}
	}
}
