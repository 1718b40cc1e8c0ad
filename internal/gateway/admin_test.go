package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

const adminToken = "admin-token-0123456789abcdef"

// chaosStdio returns a server entry running the test binary as a chaos
// server (the fake plus the faults of opts).
func chaosStdio(name string, opts testkit.ChaosOptions) *config.Server {
	cmd, args, env := testkit.ChaosCommand(opts)
	gw := config.Defaults()
	s := gw.NewServer(name)
	s.Command, s.Args, s.Env = cmd, args, map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		s.Env[k] = v
	}
	return s
}

// adminConfig is a gateway with a shared server "shared" (whose stderr
// says something hostile at start), a session-isolated "iso", and the
// admin token.
func adminConfig() *config.Config {
	shared := chaosStdio("shared", testkit.ChaosOptions{StartupStderr: `<img src=x onerror=alert(1)> started`})
	iso := fakeServer("iso", testkit.FakeOptions{})
	iso.Isolation = config.IsolationSession
	cfg := newConfig(shared, iso)
	cfg.Gateway.Admin = config.NewAdmin()
	cfg.Gateway.Admin.Token = adminToken
	return cfg
}

// adminDo sends an admin request with token (none for "") and decodes a
// JSON answer into out (if not nil).
func (g *testGateway) adminDo(t *testing.T, base, method, path, token string, out any) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, body)
		}
	}
	return resp
}

type adminServers struct {
	Servers []struct {
		Name, Type, Isolation, State, LastExit string
		Ready                                  bool
		PID                                    int
		Restarts                               uint64
		Stderr, Tools                          []string
		ToolsError                             string
		Pending, Processes                     int
	}
}

func (s adminServers) get(name string) (i int) {
	for i := range s.Servers {
		if s.Servers[i].Name == name {
			return i
		}
	}
	return -1
}

type adminSessions struct {
	Sessions []struct {
		ID, Target, Version, Principal string
		Active                         int
		Requests                       uint64
	}
}

// TestAdminOffWithoutBlock: no gateway.admin, no admin routes.
func TestAdminOffWithoutBlock(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("a", testkit.FakeOptions{})))
	for _, p := range []string{"/admin/servers", "/admin/sessions", "/status"} {
		if r := g.adminDo(t, g.URL, "GET", p, adminToken, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("%s without gateway.admin: %d, want 404", p, r.StatusCode)
		}
	}
}

// TestAdminAuthRefusals: no credentials 401 with a Bearer challenge, a
// wrong token 401, a principal without an admin scope 403, with one 200;
// another site's Origin 403 even with the token.
func TestAdminAuthRefusals(t *testing.T) {
	sum := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Gateway.Admin = config.NewAdmin()
	cfg.Gateway.Admin.Token = adminToken
	cfg.Gateway.Auth = config.NewAuth()
	cfg.Gateway.Auth.APIKeys = []config.APIKey{
		{Name: "root", SHA256: sum("root-key-0123456789"), Scopes: []string{"admin"}},
		{Name: "ci", SHA256: sum("ci-key-0123456789"), Scopes: []string{"mcp"}},
	}
	g := startGateway(t, cfg)
	for _, p := range []string{"/admin/servers", "/admin/sessions", "/admin/summary"} {
		r := g.adminDo(t, g.URL, "GET", p, "", nil)
		if r.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s without credentials: %d %q", p, r.StatusCode, r.Header.Get("WWW-Authenticate"))
		}
	}
	for _, c := range []struct {
		token string
		want  int
	}{
		{"wrong-token-0123456789", http.StatusUnauthorized},
		{"ci-key-0123456789", http.StatusForbidden},
		{"root-key-0123456789", http.StatusOK},
		{adminToken, http.StatusOK},
	} {
		if r := g.adminDo(t, g.URL, "GET", "/admin/servers", c.token, nil); r.StatusCode != c.want {
			t.Errorf("token %.8s...: %d, want %d", c.token, r.StatusCode, c.want)
		}
	}
	req, _ := http.NewRequest("DELETE", g.URL+"/admin/sessions/abcdefgh", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin DELETE: %d, want 403", resp.StatusCode)
	}
}

// TestAdminServersAndSessions: each server's state, process, stderr and
// tools; each session by its id prefix only, with its principal.
func TestAdminServersAndSessions(t *testing.T) {
	g := startGateway(t, adminConfig())
	c := g.client("shared")
	c.connect(t)
	var sv adminServers
	testkit.WaitFor(t, "the shared server ready with its stderr", func() bool {
		g.adminDo(t, g.URL, "GET", "/admin/servers", adminToken, &sv)
		i := sv.get("shared")
		return i >= 0 && sv.Servers[i].Ready && len(sv.Servers[i].Stderr) > 0
	})
	s := sv.Servers[sv.get("shared")]
	if s.State != "ready" || s.PID == 0 || s.Type != "stdio" || s.Isolation != "shared" ||
		!strings.Contains(strings.Join(s.Stderr, "\n"), "<img src=x onerror=alert(1)> started") {
		t.Errorf("shared: %+v", s)
	}
	if !strings.Contains(","+strings.Join(s.Tools, ",")+",", ",echo,") {
		t.Errorf("shared tools: %q (%s)", s.Tools, s.ToolsError)
	}
	iso := sv.Servers[sv.get("iso")]
	if iso.State != "per session" || iso.PID != 0 || iso.Tools != nil {
		t.Errorf("iso: %+v", iso)
	}

	var ss adminSessions
	g.adminDo(t, g.URL, "GET", "/admin/sessions", adminToken, &ss)
	if len(ss.Sessions) != 1 {
		t.Fatalf("sessions: %+v", ss)
	}
	got := ss.Sessions[0]
	if got.ID != c.session[:8] || got.Target != "shared" || got.Version != "2025-11-25" || got.Requests == 0 {
		t.Errorf("session: %+v (id %.8s...)", got, c.session)
	}
	resp, err := g.http.Do(mustReq(t, "GET", g.URL+"/admin/sessions", adminToken))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), c.session) {
		t.Errorf("the whole session id is in /admin/sessions")
	}
	var sum struct{ RequestsTotal uint64 }
	g.adminDo(t, g.URL, "GET", "/admin/summary", adminToken, &sum)
	if sum.RequestsTotal < 2 {
		t.Errorf("requestsTotal %d after initialize and initialized", sum.RequestsTotal)
	}
}

func mustReq(t *testing.T, method, u, token string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// TestAdminEndSession: a session ended by prefix; its call in flight is
// told an administrator ended it, its next request gets 404; unknown ids
// 404.
func TestAdminEndSession(t *testing.T) {
	g := startGateway(t, adminConfig())
	c := g.client("shared")
	c.connect(t)
	var wg sync.WaitGroup
	var inflight rpc
	wg.Go(func() {
		inflight = c.post(t, callBody("9", "slow", map[string]int{"ms": 60000}, "")).final(t)
	})
	testkit.WaitFor(t, "the call in flight", func() bool { return g.pending("shared") == 1 })
	var ended struct{ Ended struct{ ID, Target string } }
	if r := g.adminDo(t, g.URL, "DELETE", "/admin/sessions/"+c.session[:8], adminToken, &ended); r.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
	wg.Wait()
	if ended.Ended.ID != c.session[:8] || ended.Ended.Target != "shared" {
		t.Errorf("ended: %+v", ended)
	}
	if inflight.Error == nil || !strings.Contains(inflight.Error.Message, "the session was ended by an administrator") {
		t.Errorf("the call in flight got %+v", inflight)
	}
	if r := c.post(t, callBody("10", "echo", map[string]string{"message": "x"}, "")); r.Status != http.StatusNotFound {
		t.Errorf("next request: %d, want 404", r.Status)
	}
	for _, id := range []string{c.session[:8], c.session, "zzzzzzzz", "ab"} {
		if r := g.adminDo(t, g.URL, "DELETE", "/admin/sessions/"+url.PathEscape(id), adminToken, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("DELETE %.8s: %d, want 404", id, r.StatusCode)
		}
	}
}

// TestAdminRestartServer: a shared server's process restarts (a new pid,
// its call in flight told why); a session-isolated one has nothing shared
// (409); an unknown one 404.
func TestAdminRestartServer(t *testing.T) {
	g := startGateway(t, adminConfig())
	c := g.client("shared")
	c.connect(t)
	var sv adminServers
	g.adminDo(t, g.URL, "GET", "/admin/servers", adminToken, &sv)
	old := sv.Servers[sv.get("shared")].PID
	if old == 0 {
		t.Fatalf("no pid: %+v", sv)
	}
	var wg sync.WaitGroup
	var inflight rpc
	wg.Go(func() {
		inflight = c.post(t, callBody("9", "slow", map[string]int{"ms": 60000}, "")).final(t)
	})
	testkit.WaitFor(t, "the call in flight", func() bool { return g.pending("shared") == 1 })
	if r := g.adminDo(t, g.URL, "POST", "/admin/servers/shared/restart", adminToken, nil); r.StatusCode != http.StatusAccepted {
		t.Fatalf("restart: %d", r.StatusCode)
	}
	wg.Wait()
	if inflight.Error == nil || !strings.Contains(inflight.Error.Message, "restarted by an administrator") {
		t.Errorf("the call in flight got %+v", inflight)
	}
	testkit.WaitFor(t, "a new process, ready", func() bool {
		g.adminDo(t, g.URL, "GET", "/admin/servers", adminToken, &sv)
		s := sv.Servers[sv.get("shared")]
		return s.Ready && s.PID != 0 && s.PID != old
	})
	s := sv.Servers[sv.get("shared")]
	if s.Restarts != 1 || !strings.Contains(s.LastExit, "restarted by an administrator") {
		t.Errorf("after restart: restarts %d, last exit %q", s.Restarts, s.LastExit)
	}
	if r := c.post(t, callBody("10", "echo", map[string]string{"message": "again"}, "")); r.Status != http.StatusOK || r.final(t).Error != nil {
		t.Errorf("a call after the restart: %d %s", r.Status, r.Body)
	}
	if r := g.adminDo(t, g.URL, "POST", "/admin/servers/iso/restart", adminToken, nil); r.StatusCode != http.StatusConflict {
		t.Errorf("restart iso: %d, want 409", r.StatusCode)
	}
	if r := g.adminDo(t, g.URL, "POST", "/admin/servers/nope/restart", adminToken, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("restart nope: %d, want 404", r.StatusCode)
	}
}

// TestAdminSeparateListener: with gateway.admin.listen the admin routes
// are there only, and the listener closes with the gateway.
func TestAdminSeparateListener(t *testing.T) {
	cfg := adminConfig()
	cfg.Gateway.Admin.Listen = "127.0.0.1:0"
	g := startGateway(t, cfg)
	addr := g.gw.AdminAddr()
	if addr == nil {
		t.Fatal("no admin listener")
	}
	base := "http://" + addr.String()
	if r := g.adminDo(t, g.URL, "GET", "/admin/servers", adminToken, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("main listener /admin/servers: %d, want 404", r.StatusCode)
	}
	if r := g.adminDo(t, base, "GET", "/admin/servers", adminToken, nil); r.StatusCode != http.StatusOK {
		t.Errorf("admin listener /admin/servers: %d", r.StatusCode)
	}
	if r := g.adminDo(t, base, "GET", "/admin/servers", "", nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("admin listener without a token: %d", r.StatusCode)
	}
	req := mustReq(t, "GET", base+"/admin/servers", adminToken)
	req.Host = "evil.example"
	if resp, err := g.http.Do(req); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host on the admin listener: %d", resp.StatusCode)
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr.String()); err == nil {
		c.Close()
		t.Errorf("the admin listener outlived the gateway")
	}
}

// TestStatusPageLogin: the login form without credentials; the token in
// the URL or a form sets an HttpOnly SameSite=Strict cookie and sends the
// browser to /status; the page has a hash-based CSP and no token.
func TestStatusPageLogin(t *testing.T) {
	g := startGateway(t, adminConfig())
	noRedirect := &http.Client{Transport: g.http.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	resp, err := noRedirect.Get(g.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `<form method="post"`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("/status without credentials: %d %q", resp.StatusCode, body)
	}
	check := func(resp *http.Response, how string) *http.Cookie {
		t.Helper()
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "status" {
			t.Fatalf("%s: %d to %q", how, resp.StatusCode, resp.Header.Get("Location"))
		}
		for _, c := range resp.Cookies() {
			if c.Name == "mcpgate_admin" && c.HttpOnly && c.SameSite == http.SameSiteStrictMode && c.Value == adminToken {
				return c
			}
		}
		t.Fatalf("%s: no HttpOnly SameSite=Strict cookie: %q", how, resp.Header.Values("Set-Cookie"))
		return nil
	}
	resp, err = noRedirect.Get(g.URL + "/status?token=" + adminToken)
	if err != nil {
		t.Fatal(err)
	}
	cookie := check(resp, "?token=")
	resp, err = noRedirect.PostForm(g.URL+"/status", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	check(resp, "the form")
	resp, err = noRedirect.PostForm(g.URL+"/status", url.Values{"token": {"wrong-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("a wrong token in the form: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}

	req, _ := http.NewRequest("GET", g.URL+"/status", nil)
	req.AddCookie(cookie)
	resp, err = g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "mcpgate status") ||
		!strings.Contains(csp, "script-src 'self' 'sha256-") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("/status with the cookie: %d, CSP %q", resp.StatusCode, csp)
	}
	if strings.Contains(string(body), adminToken) {
		t.Errorf("the page holds the token")
	}
	req, _ = http.NewRequest("GET", g.URL+"/admin/sessions", nil)
	req.AddCookie(cookie)
	if resp, err := g.http.Do(req); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Errorf("/admin/sessions with the cookie: %d", resp.StatusCode)
	}
}

// TestAdminListenFailureStartsNothing: an admin address that cannot be
// listened on fails Start, naming the key, with every process stopped.
func TestAdminListenFailureStartsNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	marker := "admin-listen-" + strings.ReplaceAll(t.Name(), "/", "-")
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{Marker: marker}))
	cfg.Gateway.Admin = config.NewAdmin()
	cfg.Gateway.Admin.Token = adminToken
	cfg.Gateway.Admin.Listen = taken.Addr().String()
	if _, err := Start(cfg, testLogger(t)); err == nil || !strings.Contains(err.Error(), "gateway.admin.listen") {
		t.Fatalf("Start: %v", err)
	}
	if left := testkit.WaitProcsGone(marker, 10*time.Second); len(left) != 0 {
		t.Errorf("processes left: %+v", left)
	}
}

// inCluster makes cfg replica "pod-a" of a cluster on a real Redis,
// advertised at advertise (nothing needs to listen there for one replica).
func inCluster(t *testing.T, cfg *config.Config, advertise string) *config.Config {
	t.Helper()
	cfg.Gateway.SealKeys = []config.SealKey{{ID: "k1", Secret: bytes.Repeat([]byte{3}, 32), Primary: true}}
	cfg.Gateway.Cluster = &config.Cluster{
		Instance: "pod-a", Advertise: advertise, Redis: &config.Redis{URL: "redis://" + testkit.Redis(t) + "/0"},
		Heartbeat: 100 * time.Millisecond, SessionMaxAge: time.Hour,
	}
	return cfg
}

// TestAdminCluster: a replica of a cluster names itself in the summary
// and its sessions' owner (itself) in the list; a whole id of no session
// is 404, saying a prefix names only this replica's sessions.
func TestAdminCluster(t *testing.T) {
	g := startGateway(t, inCluster(t, adminConfig(), "127.0.0.1:1"))
	c := g.client("shared")
	c.connect(t)
	var sum struct {
		Cluster struct {
			Instance, Advertise, Redis string
			Self                       bool
			LiveReplicas               int
		}
	}
	testkit.WaitFor(t, "the summary to see Redis and this replica live", func() bool {
		g.adminDo(t, g.URL, "GET", "/admin/summary", adminToken, &sum)
		return sum.Cluster.LiveReplicas == 1 && sum.Cluster.Redis == "up"
	})
	if s := sum.Cluster; s.Instance != "pod-a" || s.Advertise != "127.0.0.1:1" || !s.Self {
		t.Errorf("summary's cluster: %+v", s)
	}
	var list struct {
		Sessions []struct {
			ID       string
			Portable bool
			Owner    *struct {
				Instance, Advertise string
				Self                bool
			}
		}
	}
	g.adminDo(t, g.URL, "GET", "/admin/sessions", adminToken, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != c.session[:8] || list.Sessions[0].Portable {
		t.Fatalf("sessions: %+v", list)
	}
	if o := list.Sessions[0].Owner; o == nil || o.Instance != "pod-a" || o.Advertise != "127.0.0.1:1" || !o.Self {
		t.Errorf("owner: %+v", o)
	}
	resp, err := g.http.Do(mustReq(t, "DELETE", g.URL+"/admin/sessions/"+url.PathEscape(c.session+"x"), adminToken))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "whole id") {
		t.Errorf("DELETE of no session: %d %s", resp.StatusCode, body)
	}
	var ended struct{ Ended struct{ ID, EndedOn string } }
	if r := g.adminDo(t, g.URL, "DELETE", "/admin/sessions/"+url.PathEscape(c.session), adminToken, &ended); r.StatusCode != http.StatusOK || ended.Ended.EndedOn != "here" {
		t.Errorf("DELETE of the session: %d %+v", r.StatusCode, ended)
	}
}
