package front

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// fakeAuth is an Authenticator for the front's tests. Bearer tokens:
// "alice" and "bob" are tokens of those subjects; "alice-key" is an API
// key named "alice" (another principal than the token "alice"); "reader"
// is a valid token without the needed scope (403). Targets named in open
// ("server/x", "endpoint/all") are not protected: a request without
// credentials passes as nobody, one with valid credentials as their
// principal.
type fakeAuth struct {
	open map[string]bool

	mu      sync.Mutex
	targets []auth.Target // every target Authenticate was asked about
}

func newFakeAuth(open ...string) *fakeAuth {
	a := &fakeAuth{open: map[string]bool{}}
	for _, o := range open {
		a.open[o] = true
	}
	return a
}

var fakePrincipals = map[string]auth.Principal{
	"alice":     {Name: "alice", Kind: "token", Scopes: []string{"mcp"}},
	"bob":       {Name: "bob", Kind: "token", Scopes: []string{"mcp"}},
	"alice-key": {Name: "alice", Kind: "key"},
}

func (a *fakeAuth) protected(t auth.Target) bool { return !a.open[t.Kind+"/"+t.Name] }

func (a *fakeAuth) Authenticate(r *http.Request, t auth.Target) auth.Decision {
	a.mu.Lock()
	a.targets = append(a.targets, t)
	a.mu.Unlock()
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if p, ok := fakePrincipals[token]; ok {
		return auth.Decision{Principal: &p}
	}
	if !a.protected(t) && token == "" {
		return auth.Decision{}
	}
	if token == "reader" {
		return auth.Decision{Status: http.StatusForbidden, Reason: "insufficient scope: mcp needed",
			Challenge: `Bearer error="insufficient_scope", scope="mcp", resource_metadata="` + t.Metadata + `"`}
	}
	return auth.Decision{Status: http.StatusUnauthorized, Reason: "no valid bearer token",
		Challenge: `Bearer resource_metadata="` + t.Metadata + `", scope="mcp"`}
}

func (a *fakeAuth) Metadata(t auth.Target) ([]byte, bool) {
	if !a.protected(t) {
		return nil, false
	}
	return []byte(`{"resource":` + strconv.Quote(t.Resource) + `,"authorization_servers":["https://as.example.com"],"scopes_supported":["mcp"]}`), true
}

// lastTarget returns the target of the latest Authenticate.
func (a *fakeAuth) lastTarget() auth.Target {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.targets) == 0 {
		return auth.Target{}
	}
	return a.targets[len(a.targets)-1]
}

// seenPrincipals records the principal each call of a backend got in its
// context, as "where=kind:name" ("where=-" for none).
type seenPrincipals struct {
	mu   sync.Mutex
	seen []string
}

func (s *seenPrincipals) add(where string, ctx context.Context) {
	name := "-"
	if p := conn.Principal(ctx); p != nil {
		name = p.Kind + ":" + p.Name
	}
	s.mu.Lock()
	s.seen = append(s.seen, where+"="+name)
	s.mu.Unlock()
}

func (s *seenPrincipals) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// spyBackend is a statelessBackend whose Open, OpenStateless and
// connections' Handle record their principal.
type spyBackend struct {
	*statelessBackend
	seen *seenPrincipals
}

func (b spyBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	b.seen.add("open", ctx)
	c, err := b.statelessBackend.Open(ctx, general)
	if err != nil {
		return nil, err
	}
	return spyConn{c, b.seen}, nil
}

func (b spyBackend) OpenStateless(ctx context.Context, general conn.Stream, v string, caps []byte) (conn.StatelessConn, error) {
	b.seen.add("openStateless", ctx)
	c, err := b.statelessBackend.OpenStateless(ctx, general, v, caps)
	if err != nil {
		return conn.StatelessConn{}, err
	}
	return c.WithConn(spyConn{c.Conn, b.seen}), nil
}

type spyConn struct {
	conn.Conn
	seen *seenPrincipals
}

func (c spyConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	c.seen.add("handle "+msg.MethodName(), ctx)
	c.Conn.Handle(ctx, msg, out)
}
