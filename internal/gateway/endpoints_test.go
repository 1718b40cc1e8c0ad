package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// toolNames lists the tools of a session (every page).
func toolNames(t *testing.T, c *mcpClient) []string {
	t.Helper()
	var names []string
	cursor := ""
	for range 100 {
		params := `{}`
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		m := c.post(t, `{"jsonrpc":"2.0","id":"list","method":"tools/list","params":`+params+`}`).final(t)
		if m.Error != nil {
			t.Fatalf("tools/list: %d %s", m.Error.Code, m.Error.Message)
		}
		var res struct {
			Tools      []struct{ Name string } `json:"tools"`
			NextCursor string                  `json:"nextCursor"`
		}
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatalf("tools/list result %s: %v", m.Result, err)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if cursor = res.NextCursor; cursor == "" {
			slices.Sort(names)
			return names
		}
	}
	t.Fatal("tools/list: more than 100 pages")
	return nil
}

// waitTools waits until a session's tools include every name of want (a
// member comes up after the session opened while its server starts: the
// endpoint shows it then, with list_changed) and returns them.
func waitTools(t *testing.T, c *mcpClient, want ...string) []string {
	t.Helper()
	var names []string
	testkit.WaitFor(t, fmt.Sprintf("tools %q to be listed", want), func() bool {
		names = toolNames(t, c)
		for _, w := range want {
			if !slices.Contains(names, w) {
				return false
			}
		}
		return true
	})
	return names
}

// endpointClient is a client of endpoint name ("" for the default one at
// /mcp).
func (g *testGateway) endpointClient(name string) *mcpClient {
	c := g.client("")
	c.url = g.URL + "/endpoints/" + name + "/mcp"
	if name == "" {
		c.url = g.URL + "/mcp"
	}
	return c
}

// An endpoint serves its servers' tools under their prefixes ("" for
// none), filtered by the server's and the endpoint's globs, and routes each
// call to its server: the very process /servers/NAME/mcp serves. An
// endpoint may share a server's name.
func TestEndpointsServeMergedServers(t *testing.T) {
	marker := fmt.Sprintf("endpoints-%d", time.Now().UnixNano())
	a := fakeServer("a", testkit.FakeOptions{Marker: marker})
	b := fakeServer("b", testkit.FakeOptions{Marker: marker})
	b.Prefix = ""
	b.Tools.Allow = []string{"echo", "pid", "crash"}
	cfg := newConfig(a, b)
	all := config.NewEndpoint("all", []string{"a", "b"})
	all.Tools.Deny = []string{"crash"}
	cfg.Endpoints["all"] = all
	cfg.Endpoints["a"] = config.NewEndpoint("a", []string{"a"})
	g := startGateway(t, cfg)

	c := g.endpointClient("")
	c.connect(t)
	names := waitTools(t, c, "a__echo", "a__pid", "a__sample", "echo", "pid")
	for _, unwanted := range []string{"a__crash", "crash", "sample", "b__echo"} {
		if slices.Contains(names, unwanted) {
			t.Errorf("the default endpoint lists %q: %q", unwanted, names)
		}
	}
	pids := map[string]string{}
	for _, server := range []string{"a", "b"} {
		direct := g.client(server)
		direct.connect(t)
		pids[server] = toolText(t, direct.post(t, callBody("1", "pid", map[string]any{}, "")).final(t))
	}
	// A filtered tool cannot be called by guessing its name: b's process
	// does not crash (it would restart with another pid).
	for _, name := range []string{"crash", "a__crash", "b__crash"} {
		if m := c.post(t, callBody("1", name, map[string]any{}, "")).final(t); m.Error == nil && !strings.Contains(string(m.Result), `"isError":true`) {
			t.Errorf("filtered tool %q was called: %s", name, m.Result)
		}
	}
	if got := toolText(t, c.post(t, callBody("2", "a__pid", map[string]any{}, "")).final(t)); got != pids["a"] {
		t.Errorf("a__pid answered by process %s, want server a's %s", got, pids["a"])
	}
	if got := toolText(t, c.post(t, callBody("3", "pid", map[string]any{}, "")).final(t)); got != pids["b"] {
		t.Errorf("pid answered by process %s, want server b's %s", got, pids["b"])
	}
	if got := toolText(t, c.post(t, callBody(`"x"`, "echo", map[string]string{"message": "to b"}, "")).final(t)); got != "to b" {
		t.Errorf("echo: %q", got)
	}

	// The endpoint named like server a serves a's tools prefixed.
	ea := g.endpointClient("a")
	ea.connect(t)
	if names := waitTools(t, ea, "a__echo"); slices.Contains(names, "echo") {
		t.Errorf("endpoint a lists %q", names)
	}
	// Its session is not the server's.
	ea.url = g.URL + "/servers/a/mcp"
	if r := ea.post(t, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); r.Status != 404 {
		t.Errorf("the endpoint's session on the server's URL: %d %s", r.Status, r.Body)
	}

	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if left := testkit.WaitProcsGone(marker, 10*time.Second); len(left) != 0 {
		t.Fatalf("processes left after shutdown: %+v", left)
	}
}

// A member that cannot start (not critical) is left out of the endpoint's
// lists, and a call to one of its tools gets an error naming it and why;
// the other members serve as ever.
func TestEndpointMemberDown(t *testing.T) {
	cfg := newConfig(fakeServer("fine", testkit.FakeOptions{}), missingServer("gone"))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"fine", "gone"})
	g := startGateway(t, cfg)
	c := g.endpointClient("")
	c.connect(t)
	names := waitTools(t, c, "fine__echo")
	for _, n := range names {
		if strings.HasPrefix(n, "gone__") {
			t.Errorf("the member that is down lists %q", n)
		}
	}
	// Its state is "starting" while a spawn is tried, and "backing off"
	// with the cause in between.
	var m rpc
	testkit.WaitFor(t, "an error naming the missing command", func() bool {
		m = c.post(t, callBody("1", "gone__echo", map[string]string{"message": "hi"}, "")).final(t)
		if m.Error == nil || !strings.Contains(m.Error.Message, `server "gone" is not available: `) {
			t.Fatalf("a call to the member that is down: %+v %s, want an error naming it", m.Error, m.Result)
		}
		return strings.Contains(m.Error.Message, "backing off: command not found: mcpgate-test-no-such-command-gone")
	})
	if got := toolText(t, c.post(t, callBody("2", "fine__echo", map[string]string{"message": "still"}, "")).final(t)); got != "still" {
		t.Errorf("fine__echo: %q", got)
	}
}

// An endpoint the aggregate refuses stops the start, naming it, and
// leaves no process behind.
func TestEndpointStartFailure(t *testing.T) {
	marker := fmt.Sprintf("endpoint-fail-%d", time.Now().UnixNano())
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{Marker: marker}))
	bad := config.NewEndpoint("bad", []string{"a"})
	bad.Tools.Allow = []string{"read_["} // config validation would refuse it
	cfg.Endpoints["bad"] = bad
	g, err := Start(cfg, testLogger(t))
	if err == nil {
		g.closeEndpoints()
		g.stopServers()
		t.Fatal("Start succeeded with an endpoint that has a malformed pattern")
	}
	if !strings.Contains(err.Error(), `endpoint "bad"`) {
		t.Errorf("error %q does not name the endpoint", err)
	}
	if left := testkit.WaitProcsGone(marker, 10*time.Second); len(left) != 0 {
		t.Fatalf("processes left after the failed start: %+v", left)
	}
}

// The startup log names each endpoint, its URL and its servers.
func TestEndpointsLogged(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}), fakeServer("b", testkit.FakeOptions{}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a", "b"})
	cfg.Endpoints["team"] = config.NewEndpoint("team", []string{"b"})
	var buf testkit.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve starts, logs, and shuts down at once
	if err := Serve(ctx, ln, cfg, log); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`msg=endpoint name=all path="/endpoints/all/mcp and /mcp" servers=a,b`,
		`msg=endpoint name=team path=/endpoints/team/mcp servers=b`,
		`endpoints=2`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestEndpointMembersShareLists: an endpoint fetches a member's lists once
// for all its sessions only when one upstream serves them all (a shared
// stdio server); a session-isolated or remote member's lists may differ
// per session, so each session fetches its own.
func TestEndpointMembersShareLists(t *testing.T) {
	shared := fakeServer("shared", testkit.FakeOptions{})
	isolated := fakeServer("isolated", testkit.FakeOptions{})
	isolated.Isolation = config.IsolationSession
	remote := fakeServer("remote", testkit.FakeOptions{})
	remote.Type, remote.URL, remote.Command = config.TypeHTTP, "http://127.0.0.1:1/mcp", ""
	cfg := newConfig(shared, isolated, remote)
	ep := config.NewEndpoint("e", []string{"shared", "isolated", "remote"})
	g := &Gateway{cfg: cfg, log: testLogger(t), servers: map[string]servers.Server{}}
	got := map[string]bool{}
	for _, m := range g.members(ep) {
		got[m.Name] = m.SharedLists
	}
	if want := map[string]bool{"shared": true, "isolated": false, "remote": false}; !maps.Equal(got, want) {
		t.Errorf("SharedLists by member: %v, want %v", got, want)
	}
}
