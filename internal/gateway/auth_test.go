package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// tokenAuth accepts "Bearer <name>" for the names in tokens (kind
// "token"); targets in open need no credentials. It counts Close.
type tokenAuth struct {
	tokens map[string]bool
	open   map[string]bool // "server/NAME", "endpoint/NAME"

	mu     sync.Mutex
	closed int
}

func (a *tokenAuth) Authenticate(r *http.Request, t auth.Target) auth.Decision {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if a.tokens[token] {
		return auth.Decision{Principal: &auth.Principal{Name: token, Kind: "token"}}
	}
	if a.open[t.Kind+"/"+t.Name] && token == "" {
		return auth.Decision{}
	}
	return auth.Decision{Status: http.StatusUnauthorized, Reason: "no valid token",
		Challenge: `Bearer resource_metadata="` + t.Metadata + `"`}
}

func (a *tokenAuth) Metadata(t auth.Target) ([]byte, bool) {
	if a.open[t.Kind+"/"+t.Name] {
		return nil, false
	}
	return []byte(`{"resource":` + strconv.Quote(t.Resource) + `,"authorization_servers":["https://as.example.com"]}`), true
}

func (a *tokenAuth) Close() error {
	a.mu.Lock()
	a.closed++
	a.mu.Unlock()
	return nil
}

func (a *tokenAuth) closes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// The gateway's handler asks the Authenticator: 401 with the challenge
// naming the gateway's own metadata URL, the document served, a session
// usable by its principal only; the Authenticator is closed at shutdown.
func TestAuthWired(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	a := &tokenAuth{tokens: map[string]bool{"alice": true, "bob": true}}
	g := startGatewayAuth(t, cfg, a)

	c := g.client("a")
	r := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	want := `Bearer resource_metadata="` + g.URL + `/.well-known/oauth-protected-resource/servers/a/mcp"`
	if r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("without credentials: %d %q, want 401 %q", r.Status, r.Header.Get("WWW-Authenticate"), want)
	}
	for path, resource := range map[string]string{
		"/servers/a/mcp": g.URL + "/servers/a/mcp", "/endpoints/all/mcp": g.URL + "/endpoints/all/mcp", "": g.URL + "/mcp",
	} {
		resp, err := g.http.Get(g.URL + "/.well-known/oauth-protected-resource" + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"resource":"`+resource+`"`) {
			t.Errorf("metadata of %q: %d %s", path, resp.StatusCode, body)
		}
	}

	c.header.Set("Authorization", "Bearer alice")
	c.connect(t)
	if r := c.post(t, callBody("1", "echo", map[string]string{"message": "hi"}, "")); r.Status != http.StatusOK || !strings.Contains(toolText(t, r.final(t)), "hi") {
		t.Fatalf("alice's call: %d %s", r.Status, r.Body)
	}
	bob := *c
	bob.header = http.Header{"Authorization": {"Bearer bob"}}
	if r := bob.post(t, callBody("2", "echo", map[string]string{"message": "hijack"}, "")); r.Status != http.StatusNotFound {
		t.Errorf("bob on alice's session: %d %s, want 404", r.Status, r.Body)
	}
	if r := c.post(t, callBody("3", "echo", map[string]string{"message": "still mine"}, "")); r.Status != http.StatusOK {
		t.Errorf("alice after bob's try: %d %s", r.Status, r.Body)
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if n := a.closes(); n != 1 {
		t.Errorf("Authenticator closed %d times at shutdown, want 1", n)
	}
}

// The gateway builds an auth.Gate from the config: gateway.auth (here an
// API key limited to server a) and the servers' "auth" keys (b: false).
// Server a asks for the key with a challenge naming its metadata URL,
// serves its document, and takes the key; b needs nothing and has no
// document; the default endpoint (protected, required) refuses the key,
// which is a's only. A key file that cannot be read stops Start.
func TestAuthGateFromConfig(t *testing.T) {
	const key = "k3y-0123456789abcdef"
	sum := sha256.Sum256([]byte(key))
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}), fakeServer("b", testkit.FakeOptions{}))
	cfg.Servers["b"].Auth = &config.TargetAuth{Off: true}
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a", "b"})
	cfg.Gateway.Auth = config.NewAuth()
	cfg.Gateway.Auth.APIKeys = []config.APIKey{{Name: "ci", SHA256: hex.EncodeToString(sum[:]), Servers: []string{"a"}}}
	g := startGateway(t, cfg)

	a := g.client("a")
	r := a.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	if r.Status != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"),
		`resource_metadata="`+g.URL+`/.well-known/oauth-protected-resource/servers/a/mcp"`) {
		t.Fatalf("a without the key: %d %q", r.Status, r.Header.Get("WWW-Authenticate"))
	}
	for path, want := range map[string]int{"/servers/a/mcp": http.StatusOK, "/servers/b/mcp": http.StatusNotFound, "": http.StatusOK} {
		resp, err := g.http.Get(g.URL + "/.well-known/oauth-protected-resource" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("metadata of %q: %d, want %d", path, resp.StatusCode, want)
		}
	}
	a.header.Set("Authorization", "Bearer "+key)
	a.connect(t)
	if r := a.post(t, callBody("1", "echo", map[string]string{"message": "with the key"}, "")); r.Status != http.StatusOK {
		t.Fatalf("a with the key: %d %s", r.Status, r.Body)
	}
	g.client("b").connect(t) // open: no credentials
	all := g.endpointClient("all")
	all.header.Set("Authorization", "Bearer "+key)
	if r := all.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusForbidden {
		t.Errorf("the default endpoint with a key for server a only: %d %s, want 403", r.Status, r.Body)
	}

	bad := newConfig(fakeServer("a", testkit.FakeOptions{}))
	bad.Gateway.Auth = config.NewAuth()
	bad.Gateway.Auth.APIKeys = []config.APIKey{{Name: "ci", KeyFile: filepath.Join(t.TempDir(), "missing")}}
	if _, err := Start(bad, testLogger(t)); err == nil || !strings.Contains(err.Error(), "ci") {
		t.Errorf("Start with an unreadable key file: %v", err)
	}
	bad.Gateway.Auth.PublicURL = "https://gw.example.com"
	if hc := handlerConfig(bad, nil, testLogger(t)); hc.PublicURL != "https://gw.example.com" {
		t.Errorf("handler public URL %q", hc.PublicURL)
	}
}

// The startup log names the protected targets and the open ones (the
// default endpoint's /mcp with it), and warns when open ones are reachable
// beyond loopback.
func TestAuthStartupLog(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}), fakeServer("b", testkit.FakeOptions{}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a", "b"})
	cfg.Gateway.Listen = "0.0.0.0:0"
	a := &tokenAuth{open: map[string]bool{"server/b": true}}
	var buf testkit.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	g, err := start(cfg, log, a)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve starts, logs, and shuts down at once
	if err := g.serve(ctx, ln); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`msg=authentication protected=/servers/a/mcp,/endpoints/all/mcp,/mcp open=/servers/b/mcp`,
		`level=WARN msg="listening on a non-loopback address: anyone who can reach it can use the targets that need no credentials"`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "without authentication") {
		t.Errorf("log says there is no authentication:\n%s", buf.String())
	}
}

// headerRecorder records the headers of every request a remote server gets.
type headerRecorder struct {
	next http.Handler
	mu   sync.Mutex
	seen []http.Header
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Clone())
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

func (h *headerRecorder) headers() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.seen...)
}

// The client's credentials never reach a remote server: whatever the era
// and URL (a session, a stateless request passed through to a server of
// the revision, through an endpoint), the remote gets its configured
// headers and the transport's, and the Mcp-Param-* headers of a
// passed-through stateless request, never the client's Authorization.
func TestClientTokenNotForwarded(t *testing.T) {
	echo := echoserver.NewHandler()
	rec := &headerRecorder{next: echo}
	up := httptest.NewServer(rec)
	t.Cleanup(func() {
		echo.Close()
		up.CloseClientConnections()
		up.Close()
	})
	gw := config.Defaults()
	s := gw.NewServer("r")
	s.Type, s.URL = config.TypeHTTP, up.URL+"/mcp"
	s.Headers = map[string]string{"Authorization": "Bearer upstream-secret", "X-Upstream": "configured"}
	cfg := newConfig(s)
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"r"})
	a := &tokenAuth{tokens: map[string]bool{"client-token": true}}
	g := startGatewayAuth(t, cfg, a)

	for _, url := range []string{g.URL + "/servers/r/mcp", g.URL + "/mcp"} {
		c := g.client("r")
		c.url = url
		c.header.Set("Authorization", "Bearer client-token")
		c.header.Set("Mcp-Param-Message", "session")
		c.connect(t)
		if r := c.post(t, callBody("1", "echo", map[string]string{"message": "via session"}, "")); r.Status != http.StatusOK {
			t.Fatalf("session call at %s: %d %s", url, r.Status, r.Body)
		}
		req := c.request(http.MethodDelete, "")
		if r := c.do(t, req, nil); r.Status != http.StatusNoContent {
			t.Errorf("DELETE at %s: %d", url, r.Status)
		}
	}
	// A stateless request, passed through to the remote (it speaks the
	// revision): its Mcp-Param-* headers go along, its Authorization not.
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"stateless"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/servers/r/mcp", strings.NewReader(body))
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
		"Mcp-Method": "tools/call", "Mcp-Name": "echo", "Mcp-Param-Message": "stateless", "Authorization": "Bearer client-token",
	} {
		req.Header.Set(k, v)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), "stateless") {
		t.Fatalf("stateless call: %d %s", resp.StatusCode, out)
	}

	seen := rec.headers()
	params := 0
	for i, h := range seen {
		if got := h.Values("Authorization"); len(got) != 1 || got[0] != "Bearer upstream-secret" || h.Get("X-Upstream") != "configured" {
			t.Errorf("upstream request %d: Authorization %q, X-Upstream %q", i, got, h.Get("X-Upstream"))
		}
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, "client-token") {
					t.Errorf("upstream request %d carries the client's token in %s", i, k)
				}
			}
		}
		if v := h.Get("Mcp-Param-Message"); v != "" {
			params++
			if v != "stateless" {
				t.Errorf("upstream request %d: Mcp-Param-Message %q from a session request", i, v)
			}
		}
	}
	if len(seen) < 5 || params == 0 {
		t.Errorf("%d upstream requests, %d with the stateless request's Mcp-Param-Message: want the calls and the header", len(seen), params)
	}
}
