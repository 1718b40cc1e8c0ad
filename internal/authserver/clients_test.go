package authserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// clientsTestStart is where every test's clock starts.
var clientsTestStart = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func newClientsClock() *testkit.Clock { return testkit.NewClock(clientsTestStart) }

// newClientsServer builds a Server with the default config (issuer
// https://gw.example.com), changed by edit, on clock.
func newClientsServer(t testing.TB, clock *testkit.Clock, edit func(*config.AuthServer)) *Server {
	t.Helper()
	cfg := config.NewAuthServer()
	cfg.Issuer = "https://gw.example.com"
	cfg.Scopes = []string{"mcp"}
	if edit != nil {
		edit(cfg)
	}
	s, err := New(*cfg, Deps{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewRefusesBadRedirectPattern(t *testing.T) {
	cfg := config.NewAuthServer()
	cfg.Issuer = "https://gw.example.com"
	cfg.RedirectURIs = []string{"https://*.com/cb"}
	if _, err := New(*cfg, Deps{}); err == nil {
		t.Fatal("New accepted a pattern that matches every .com host")
	}
}

func TestRedirectAllowedFollowsConfig(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), func(c *config.AuthServer) {
		c.RedirectURIs = []string{"https://app.example.com/cb"}
		c.LoopbackRedirects = false
	})
	if !s.clients.redirectAllowed("https://app.example.com/cb") {
		t.Error("the configured URL is refused")
	}
	if s.clients.redirectAllowed("https://claude.ai/api/mcp/auth_callback") {
		t.Error("a default URL is allowed though redirectUris replaced the defaults")
	}
	if s.clients.redirectAllowed("http://127.0.0.1:8000/cb") {
		t.Error("a loopback URL is allowed with loopbackRedirects off")
	}
	d := newClientsServer(t, newClientsClock(), nil)
	if !d.clients.redirectAllowed("https://claude.ai/api/mcp/auth_callback") || !d.clients.redirectAllowed("http://localhost:1234/cb") {
		t.Error("the defaults do not allow Claude's callback and loopback")
	}
}

func TestClientFromStore(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	ctx := context.Background()
	if _, err := s.clients.client(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown client: %v, want ErrNotFound", err)
	}
	want := &Client{ID: "abc", RedirectURIs: []string{"http://127.0.0.1/cb"}, AuthMethod: clientAuthNone}
	if err := s.store.PutClient(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.clients.client(ctx, "abc")
	if err != nil || got.ID != "abc" || got.RedirectURIs[0] != "http://127.0.0.1/cb" {
		t.Fatalf("client = %+v, %v", got, err)
	}
}

func TestAdmitPrunesOldestUnusedClients(t *testing.T) {
	clock := newClientsClock()
	s := newClientsServer(t, clock, nil)
	s.clients.maxClients = 3
	ctx := context.Background()
	add := func(id string) error {
		clock.Advance(time.Minute)
		return s.clients.admit(ctx, &Client{ID: id, CreatedAt: clock.Now(), AuthMethod: clientAuthNone})
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := add(id); err != nil {
			t.Fatal(err)
		}
	}
	// a is the oldest but has a grant: b, the oldest never used, goes.
	if err := s.store.PutGrant(ctx, &Grant{ID: "g1", ClientID: "a", CreatedAt: clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := add("d"); err != nil {
		t.Fatal(err)
	}
	assertClients(t, s, "a", "c", "d")
	// Replacing a client (a refreshed document) prunes nothing.
	c, err := s.store.Client(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	c.Name = "refreshed"
	if err := s.clients.admit(ctx, c); err != nil {
		t.Fatal(err)
	}
	assertClients(t, s, "a", "c", "d")
	for i, id := range []string{"c", "d"} {
		if err := s.store.PutGrant(ctx, &Grant{ID: "g" + id, ClientID: id, CreatedAt: clock.Now().Add(time.Duration(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := add("e"); !errors.Is(err, errClientsFull) {
		t.Fatalf("admit with every client in use = %v, want errClientsFull", err)
	}
	assertClients(t, s, "a", "c", "d")
}

func assertClients(t *testing.T, s *Server, want ...string) {
	t.Helper()
	cs, err := s.store.Clients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.ID)
	}
	if len(got) != len(want) {
		t.Fatalf("clients %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("clients %v, want %v", got, want)
		}
	}
}
