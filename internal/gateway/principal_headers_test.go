package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// keyAuth maps client tokens to principal names; a request without a
// token is anonymous (no target is protected).
type keyAuth map[string]string

func (a keyAuth) Authenticate(r *http.Request, _ auth.Target) auth.Decision {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		return auth.Decision{}
	}
	if name, ok := a[token]; ok {
		return auth.Decision{Principal: &auth.Principal{Name: name, Kind: auth.KindKey}}
	}
	return auth.Decision{Status: http.StatusUnauthorized, Reason: "unknown key"}
}

func (keyAuth) Metadata(auth.Target) ([]byte, bool) { return nil, false }

// startLogged is startGatewayAuth logging at debug level to logs too.
func startLogged(t *testing.T, cfg *config.Config, a auth.Authenticator, logs io.Writer) *testGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testkit.LogWriter{T: t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw, err := start(cfg, log, a)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.serve(ctx, ln) }()
	tr := &http.Transport{}
	g := &testGateway{URL: "http://" + ln.Addr().String(), http: &http.Client{Transport: tr}, gw: gw}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway stop: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("gateway did not stop within 30s")
		}
		tr.CloseIdleConnections()
	})
	return g
}

// TestPrincipalHeadersUpstream: through the HTTP front, each principal's
// session and stateless request reach a remote with its own token from
// the secrets file (over the static headers), never the client's own; a
// principal without the secret, and an anonymous client, are refused with
// an error naming the secret; no log line carries a secret or a token.
func TestPrincipalHeadersUpstream(t *testing.T) {
	echo := echoserver.NewHandler()
	rec := &headerRecorder{next: echo}
	up := httptest.NewServer(rec)
	t.Cleanup(func() {
		echo.Close()
		up.CloseClientConnections()
		up.Close()
	})
	gw := config.Defaults()
	s := gw.NewServer("github")
	s.Type, s.URL = config.TypeHTTP, up.URL+"/mcp"
	s.Headers = map[string]string{"Authorization": "Bearer static-SECRET", "X-Static": "s"}
	s.PrincipalHeaders = map[string]config.Template{}
	for name, text := range map[string]string{"Authorization": "Bearer {{secret.github_token}}", "X-User": "{{principal}}"} {
		tm, err := config.ParseTemplate(text)
		if err != nil {
			t.Fatal(err)
		}
		s.PrincipalHeaders[name] = tm
	}
	s.Secrets = config.NewSecrets("secrets.json", map[string]map[string]string{
		"alice": {"github_token": "tok-alice-SECRET"},
		"bob":   {"github_token": "tok-bob-SECRET"},
	})
	cfg := newConfig(s)
	logs := &testkit.SyncBuffer{}
	g := startLogged(t, cfg, keyAuth{"client-alice": "alice", "client-bob": "bob", "client-carol": "carol"}, logs)

	for _, who := range []string{"alice", "bob"} {
		c := g.client("github")
		c.header.Set("Authorization", "Bearer client-"+who)
		c.connect(t)
		if r := c.post(t, callBody("1", "echo", map[string]string{"message": who + "-session"}, "")); r.Status != http.StatusOK {
			t.Fatalf("session call of %s: %d %s", who, r.Status, r.Body)
		}
		body := callBody("2", "echo", map[string]string{"message": who + "-stateless"},
			`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`)
		if r := statelessPost(t, g, "Bearer client-"+who, body); r.status != http.StatusOK || !strings.Contains(r.body, who+"-stateless") {
			t.Fatalf("stateless call of %s: %d %s", who, r.status, r.body)
		}
	}

	refusals := map[string]string{
		"Bearer client-carol": `mcpgate: server \"github\" needs secret \"github_token\" for principal \"carol\" (header \"Authorization\", gateway.secretsFile)`,
		"":                    `mcpgate: server \"github\" needs an authenticated principal (its header \"Authorization\" is per principal)`,
	}
	for token, want := range refusals {
		c := g.client("github")
		if token != "" {
			c.header.Set("Authorization", token)
		}
		r := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
		if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), want) {
			t.Errorf("initialize with %q: %d %s\n want 403 with %s", token, r.Status, r.Body, want)
		}
		body := callBody("3", "echo", map[string]string{"message": "x"},
			`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`)
		if r := statelessPost(t, g, token, body); r.status != http.StatusForbidden || !strings.Contains(r.body, want) {
			t.Errorf("stateless request with %q: %d %s\n want 403 with %s", token, r.status, r.body, want)
		}
	}

	users := map[string]int{}
	for i, h := range rec.headers() {
		user := h.Get("X-User")
		users[user]++
		if got := h.Values("Authorization"); len(got) != 1 || got[0] != "Bearer tok-"+user+"-SECRET" || h.Get("X-Static") != "s" {
			t.Errorf("upstream request %d of %q: wrong Authorization or X-Static", i, user)
		}
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, "client-") {
					t.Errorf("upstream request %d carries a client's token in %s", i, k)
				}
			}
		}
	}
	if len(users) != 2 || users["alice"] < 3 || users["bob"] < 3 {
		t.Errorf("upstream requests by X-User: %v, want alice's and bob's (initialize, initialized, calls)", users)
	}
	if text := logs.String(); strings.Contains(text, "SECRET") || strings.Contains(text, "client-") {
		t.Errorf("a secret or a client token was logged:\n%s", text)
	}
}

type rawReply struct {
	status int
	body   string
}

// statelessPost sends a 2026-07-28 tools/call of echo to /servers/github/mcp.
func statelessPost(t *testing.T, g *testGateway, authorization, body string) rawReply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/servers/github/mcp", strings.NewReader(body))
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo",
	} {
		req.Header.Set(k, v)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return rawReply{resp.StatusCode, fmt.Sprint(string(out))}
}
