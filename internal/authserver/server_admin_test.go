package authserver

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// The admin's view lists clients and grants without a secret or a hash
// of one; revoking a grant ends it at once; deleting a client revokes
// its grants; unknown ids say so.
func TestServerAdmin(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	store := newMemStore(time.Now, time.Minute)
	cfg := config.NewAuthServer()
	cfg.Issuer, cfg.Scopes = "https://gw.example", []string{"mcp"}
	s, err := New(*cfg, Deps{Store: store, Resources: func() []string { return []string{testGrant("", "", "", now).Resource} }})
	if err != nil {
		t.Fatal(err)
	}
	secretHash := secret("client secret")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(store.PutClient(ctx, &Client{ID: "conf", Name: "Claude", SecretHash: secretHash, AuthMethod: "client_secret_post", CreatedAt: now}))
	must(store.PutClient(ctx, &Client{ID: "https://app.example/client.json", AuthMethod: "none", Document: true, CreatedAt: now.Add(time.Second)}))
	g1 := testGrant("g1", "conf", "refresh one", now)
	g1.Previous = []Hash{secret("refresh zero")}
	must(store.PutGrant(ctx, g1))
	must(store.PutGrant(ctx, testGrant("g2", "https://app.example/client.json", "refresh two", now.Add(time.Second))))

	clients, err := s.AdminClients(ctx)
	must(err)
	grants, err := s.AdminGrants(ctx)
	must(err)
	for _, h := range []Hash{secretHash, secret("refresh one"), secret("refresh zero"), secret("refresh two")} {
		for _, enc := range []string{hex.EncodeToString(h[:]), base64.StdEncoding.EncodeToString(h[:]), strings.Trim(string(mustJSON(t, h)), "[]")} {
			if strings.Contains(string(clients), enc) || strings.Contains(string(grants), enc) {
				t.Errorf("a hash is shown: %s\n%s\n%s", enc, clients, grants)
			}
		}
	}
	for _, word := range []string{`"secretHash"`, `"refresh"`, `"previous"`} {
		if strings.Contains(string(clients)+string(grants), word) {
			t.Errorf("the admin's view names %q:\n%s\n%s", word, clients, grants)
		}
	}
	var cl []AdminClient
	var gl []AdminGrant
	must(json.Unmarshal(clients, &cl))
	must(json.Unmarshal(grants, &gl))
	if len(cl) != 2 || cl[0].ID != "conf" || !cl[0].Confidential || cl[0].Grants != 1 || cl[1].Confidential || !cl[1].Document {
		t.Errorf("clients: %+v", cl)
	}
	if len(gl) != 2 || gl[0].ID != "g1" || gl[0].ClientName != "Claude" || gl[0].User != "ann" || gl[0].Resource == "" {
		t.Errorf("grants: %+v", gl)
	}

	if ok, err := s.AdminRevokeGrant(ctx, "g1"); !ok || err != nil {
		t.Fatalf("revoking g1: %v %v", ok, err)
	}
	if !store.Revoked("g1") {
		t.Error("g1 not revoked")
	}
	if ok, err := s.AdminRevokeGrant(ctx, "g1"); ok || err != nil {
		t.Errorf("revoking g1 again: %v %v, want false", ok, err)
	}
	if ok, err := s.AdminDeleteClient(ctx, "https://app.example/client.json"); !ok || err != nil {
		t.Fatalf("deleting the document's client: %v %v", ok, err)
	}
	if !store.Revoked("g2") {
		t.Error("the deleted client's grant g2 is not revoked")
	}
	if ok, err := s.AdminDeleteClient(ctx, "nobody"); ok || err != nil {
		t.Errorf("deleting an unknown client: %v %v, want false", ok, err)
	}
	if grants, _ := s.AdminGrants(ctx); string(grants) != "[]" {
		t.Errorf("grants left: %s", grants)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
