package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// logBuffer collects a gateway's log lines for tests that look at them.
type logBuffer struct{ testkit.SyncBuffer }

// lines returns the lines that contain every one of subs.
func (b *logBuffer) lines(subs ...string) []string {
	var out []string
	for l := range strings.SplitSeq(b.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// startReloading runs cfg like startGateway, with reloads as opts say, and
// its logs (info and up) in the returned buffer as well as the test log.
func startReloading(t *testing.T, cfg *config.Config, opts ReloadOptions) (*testGateway, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(teeWriter{logs, testkit.LogWriter{T: t}}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := Start(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	fw := gw.watch(opts) // watching before the test changes the file
	g := serveTest(t, gw, ln, func(ctx context.Context, ln net.Listener) error { return gw.serveWatching(ctx, ln, fw) })
	return g, logs
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (w teeWriter) Write(p []byte) (int, error) {
	_, _ = w.a.Write(p)
	return w.b.Write(p)
}

// cloneConfig copies cfg's maps and entries, so that a test can edit the
// copy into the next config.
func cloneConfig(cfg *config.Config) *config.Config {
	c := *cfg
	c.Servers = map[string]*config.Server{}
	for name, s := range cfg.Servers {
		cp := *s
		c.Servers[name] = &cp
	}
	c.Endpoints = map[string]*config.Endpoint{}
	for name, e := range cfg.Endpoints {
		cp := *e
		c.Endpoints[name] = &cp
	}
	return &c
}

// pidOf asks a session's server for its pid (the fake's "pid" tool).
func pidOf(t *testing.T, c *mcpClient) string {
	t.Helper()
	return pidVia(t, c, "pid")
}

// pidVia is pidOf through tool (an endpoint's prefixed name).
func pidVia(t *testing.T, c *mcpClient, tool string) string {
	t.Helper()
	r := c.post(t, callBody("9", tool, map[string]string{}, ""))
	if r.Status != http.StatusOK {
		t.Fatalf("pid on %s: status %d %s", c.url, r.Status, r.Body)
	}
	return toolText(t, r.final(t))
}

func echoOK(t *testing.T, c *mcpClient, msg string) {
	t.Helper()
	r := c.post(t, callBody("2", "echo", map[string]string{"message": msg}, ""))
	if r.Status != http.StatusOK {
		t.Fatalf("echo on %s: status %d %s", c.url, r.Status, r.Body)
	}
	if got := toolText(t, r.final(t)); got != msg {
		t.Fatalf("echo on %s: %q, want %q", c.url, got, msg)
	}
}

// slowInFlight starts a long call on c and returns once the server has
// it; the returned channel gets its final message.
func slowInFlight(t *testing.T, c *mcpClient) <-chan rpc {
	t.Helper()
	started := make(chan struct{})
	out := make(chan rpc, 1)
	req := c.request(http.MethodPost, callBody("5", "slow", map[string]any{"ms": 600000, "started": true}, `{"progressToken":"p"}`))
	go func() {
		var once sync.Once
		r := c.do(t, req, func(json.RawMessage) { once.Do(func() { close(started) }) })
		once.Do(func() { close(started) })
		if len(r.Msgs) == 0 {
			out <- rpc{}
			return
		}
		var m rpc
		_ = json.Unmarshal(r.Msgs[len(r.Msgs)-1], &m)
		out <- m
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow call did not start")
	}
	return out
}

// TestReloadServers: a reload keeps an unchanged server's process and
// sessions, replaces a changed one (new process; the old one's sessions
// end with the reason, its requests in flight answered with it), stops a
// removed one, starts an added one, and changes the members of the
// endpoints on a replaced server in place (their sessions kept). Gateway
// keys that need a restart are only warned about.
func TestReloadServers(t *testing.T) {
	stamp := time.Now().UnixNano()
	mark := func(name string) string { return fmt.Sprintf("reload-%s-%d", name, stamp) }
	cfg := newConfig(
		fakeServer("keep", testkit.FakeOptions{Marker: mark("keep")}),
		fakeServer("change", testkit.FakeOptions{Marker: mark("change")}),
		fakeServer("gone", testkit.FakeOptions{Marker: mark("gone")}),
	)
	cfg.Endpoints["steady"] = config.NewEndpoint("steady", []string{"keep"})
	cfg.Endpoints["moved"] = config.NewEndpoint("moved", []string{"keep", "change"})
	g, logs := startReloading(t, cfg, ReloadOptions{})

	keep, change, gone := g.client("keep"), g.client("change"), g.client("gone")
	steady, moved := g.endpointClient("steady"), g.endpointClient("moved")
	for _, c := range []*mcpClient{keep, change, gone, steady, moved} {
		c.connect(t)
	}
	keepPID := pidOf(t, keep)
	inFlight := slowInFlight(t, change)

	next := cloneConfig(cfg)
	delete(next.Servers, "gone")
	next.Servers["change"] = fakeServer("change", testkit.FakeOptions{Marker: mark("changed")})
	next.Servers["added"] = fakeServer("added", testkit.FakeOptions{Marker: mark("added")})
	next.Gateway.Listen = "127.0.0.1:1"
	next.Gateway.MaxConnections = 7
	sum, err := g.gw.reload(next)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	want := ReloadSummary{
		Added: []string{"added"}, Removed: []string{"gone"}, Changed: []string{"change"}, Unchanged: []string{"keep"},
		EndpointsUpdated: []string{"moved"}, Restart: []string{"gateway.listen", "gateway.maxConnections"},
	}
	if fmt.Sprint(sum) != fmt.Sprint(want) {
		t.Errorf("summary %+v, want %+v", sum, want)
	}

	// Unchanged: the same process, the same sessions.
	if pid := pidOf(t, keep); pid != keepPID {
		t.Errorf("unchanged server: pid %s, was %s", pid, keepPID)
	}
	echoOK(t, keep, "still here")
	if pid := pidVia(t, steady, "keep__pid"); pid != keepPID { // the endpoint on it was not rebuilt
		t.Errorf("unchanged endpoint's member: pid %s, was %s", pid, keepPID)
	}

	// Changed: the call in flight is answered with the reason, the session
	// is gone, the old process stopped and a new one serves new sessions.
	select {
	case m := <-inFlight:
		if m.Error == nil || !strings.Contains(m.Error.Message, reasonServerChanged) {
			t.Errorf("call in flight on the changed server: %+v, want an error naming %q", m, reasonServerChanged)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call in flight on the changed server got no answer")
	}
	for _, c := range []*mcpClient{change, gone} {
		if r := c.post(t, callBody("3", "echo", map[string]string{"message": "x"}, "")); r.Status != http.StatusNotFound {
			t.Errorf("old session on %s: status %d, want 404", c.url, r.Status)
		}
	}
	for _, m := range []string{mark("change"), mark("gone")} {
		if left := testkit.WaitProcsGone(m, 10*time.Second); len(left) != 0 {
			t.Errorf("processes of %s still run: %+v", m, left)
		}
	}
	if len(testkit.Procs(mark("changed"))) == 0 {
		t.Error("the changed server's new process is not running")
	}
	change2 := g.client("change")
	change2.connect(t)
	echoOK(t, change2, "new process")
	// The endpoint on the changed server kept its session: its member
	// "change" now answers from the new process.
	testkit.WaitFor(t, "the endpoint's session on the new process", func() bool {
		m := moved.post(t, callBody("4", "change__pid", map[string]string{}, "")).final(t)
		return m.Error == nil && toolText(t, m) == pidOf(t, change2)
	})

	// Removed: unknown now. Added: served.
	if r := g.client("gone").post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusNotFound {
		t.Errorf("removed server: status %d, want 404", r.Status)
	}
	added := g.client("added")
	added.connect(t)
	echoOK(t, added, "hello")

	for _, want := range []string{
		`reason="` + reasonServerChanged + `"`, `reason="` + reasonServerRemoved + `"`,
	} {
		if len(logs.lines("session closed", want)) == 0 {
			t.Errorf("no session closed with %s in the logs", want)
		}
	}
	if len(logs.lines("level=WARN", "gateway.listen changed: restart to apply")) != 1 {
		t.Errorf("no warning about gateway.listen; logs:\n%s", logs)
	}
	if l := logs.lines("level=INFO", `msg="config reloaded"`); len(l) != 1 ||
		!strings.Contains(l[0], "servers_added=added") || !strings.Contains(l[0], "endpoints_updated=moved") {
		t.Errorf("summary lines: %q", l)
	}
	// The gateway block kept what needs a restart.
	if cfg, _, _ := g.gw.current(); cfg.Gateway.Listen == "127.0.0.1:1" {
		t.Error("gateway.listen was taken from the new config")
	}
}

// TestReloadRefused: a config with problems (a policy that does not
// compile, a critical server whose command is missing) is refused, each
// problem logged at error level, and the old config keeps serving the same
// sessions on the same processes.
func TestReloadRefused(t *testing.T) {
	marker := fmt.Sprintf("reload-refused-%d", time.Now().UnixNano())
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{Marker: marker}))
	g, logs := startReloading(t, cfg, ReloadOptions{})
	c := g.client("a")
	c.connect(t)
	pid := pidOf(t, c)

	next := cloneConfig(cfg)
	next.Servers["a"].Policy = &config.Policy{Default: "deny", Rules: []config.PolicyRule{{Effect: "allow", When: "this is not CEL ((("}}}
	crit := next.Gateway.NewServer("crit")
	crit.Command, crit.Critical = "/nonexistent/mcpgate-reload-test", true
	next.Servers["crit"] = crit
	if err := g.gw.Reload(next); err == nil {
		t.Fatal("reload of a config with problems: no error")
	}
	errs := logs.lines("level=ERROR", "config reload refused")
	if len(errs) != 2 || !strings.Contains(strings.Join(errs, "\n"), "crit") || !strings.Contains(strings.Join(errs, "\n"), "policy") {
		t.Errorf("error lines %q, want one for the policy and one for the critical server", errs)
	}
	if got := pidOf(t, c); got != pid {
		t.Errorf("pid %s after a refused reload, was %s", got, pid)
	}
	echoOK(t, c, "unchanged")
	if r := g.client("crit").post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusNotFound {
		t.Errorf("server of the refused config: status %d, want 404", r.Status)
	}
	if n := len(testkit.Procs(marker)); n != 1 {
		t.Errorf("%d processes of a, want 1", n)
	}
}

// TestReloadAPIKeys: API keys added and removed by a reload apply to the
// next requests.
func TestReloadAPIKeys(t *testing.T) {
	key := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	const oldKey, newKey = "old-0123456789abcdef", "new-0123456789abcdef"
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Gateway.Auth = config.NewAuth()
	cfg.Gateway.Auth.APIKeys = []config.APIKey{{Name: "old", SHA256: key(oldKey)}}
	g, _ := startReloading(t, cfg, ReloadOptions{})
	withKey := func(k string) *mcpClient {
		c := g.client("a")
		c.header.Set("Authorization", "Bearer "+k)
		return c
	}
	withKey(oldKey).connect(t)
	if r := withKey(newKey).post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusUnauthorized {
		t.Fatalf("new key before the reload: %d, want 401", r.Status)
	}

	next := cloneConfig(cfg)
	auth := *cfg.Gateway.Auth
	auth.APIKeys = []config.APIKey{{Name: "new", SHA256: key(newKey)}}
	next.Gateway.Auth = &auth
	if err := g.gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	c := withKey(newKey)
	c.connect(t)
	echoOK(t, c, "with the new key")
	if r := withKey(oldKey).post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusUnauthorized {
		t.Errorf("removed key after the reload: %d, want 401", r.Status)
	}
}

// TestReloadPolicy: a policy added by a reload applies to the sessions
// opened after it, without restarting the server; a session opened before
// keeps the policy it was opened under.
func TestReloadPolicy(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	g, _ := startReloading(t, cfg, ReloadOptions{})
	before := g.client("a")
	before.connect(t)
	pid := pidOf(t, before)

	next := cloneConfig(cfg)
	next.Servers["a"].Policy = &config.Policy{Default: "allow", Rules: []config.PolicyRule{{Effect: "deny", Tools: []string{"echo"}}}}
	sum, err := g.gw.reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Unchanged, []string{"a"}) || !slices.Equal(sum.EndpointsUpdated, []string{"all"}) {
		t.Errorf("summary %+v: want a unchanged (a policy needs no restart), all updated (its member's policy)", sum)
	}
	after := g.client("a")
	after.connect(t)
	if got := pidOf(t, after); got != pid {
		t.Errorf("pid %s after a policy change, was %s", got, pid)
	}
	denied := func(c *mcpClient, tool, what string) {
		t.Helper()
		m := c.post(t, callBody("2", tool, map[string]string{"message": "x"}, "")).final(t)
		if m.Error == nil || m.Error.Code != -32602 {
			t.Errorf("%s in a session %s: %+v, want -32602", tool, what, m)
		}
	}
	denied(after, "echo", "opened after the policy")
	// Sessions outlive reloads: a policy applies to the open ones at once,
	// or a tightened one would never reach a long-lived client.
	denied(before, "echo", "opened before the policy")

	// An endpoint's own policy, added where it had none, applies to its
	// open sessions too; lifting both policies allows again.
	ep := g.endpointClient("all")
	ep.connect(t)
	echoAt := func(c *mcpClient, tool, msg string) {
		t.Helper()
		r := c.post(t, callBody("3", tool, map[string]string{"message": msg}, ""))
		if got := toolText(t, r.final(t)); got != msg {
			t.Fatalf("%s on %s: %q, want %q", tool, c.url, got, msg)
		}
	}
	next2 := cloneConfig(cfg)
	next2.Endpoints["all"].Policy = &config.Policy{Default: "allow", Rules: []config.PolicyRule{{Effect: "deny", Tools: []string{"a__echo"}}}}
	if _, err := g.gw.reload(next2); err != nil {
		t.Fatal(err)
	}
	denied(ep, "a__echo", "of the endpoint opened before its policy")
	echoOK(t, before, "the server's policy lifted")
	if _, err := g.gw.reload(cloneConfig(cfg)); err != nil {
		t.Fatal(err)
	}
	echoAt(ep, "a__echo", "the endpoint's policy lifted")
}

// TestReloadAfterShutdown: Reload refuses once shutdown began.
func TestReloadAfterShutdown(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	g, _ := startReloading(t, cfg, ReloadOptions{})
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if err := g.gw.Reload(cloneConfig(cfg)); err != ErrStopped {
		t.Fatalf("reload after shutdown: %v, want ErrStopped", err)
	}
}

func TestJSONKey(t *testing.T) {
	for in, want := range map[string]string{
		"Listen": "listen", "MaxConnections": "maxConnections", "SSEReplayEvents": "sseReplayEvents", "HostRouting": "hostRouting",
	} {
		if got := jsonKey(in); got != want {
			t.Errorf("jsonKey(%q) = %q, want %q", in, got, want)
		}
	}
}
