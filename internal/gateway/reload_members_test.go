package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// waitMessage waits for a message with method on a stream (openGET's),
// skipping others.
func waitMessage(t *testing.T, ch <-chan json.RawMessage, method string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before %s", method)
			}
			if decode(t, m).Method == method {
				return
			}
		case <-deadline:
			t.Fatalf("no %s on the stream", method)
		}
	}
}

// callError calls tool on c and returns its error message ("" if none).
func callError(t *testing.T, c *mcpClient, id, tool string) string {
	t.Helper()
	r := c.post(t, callBody(id, tool, map[string]string{"message": "x"}, ""))
	if r.Status != http.StatusOK {
		t.Fatalf("%s on %s: status %d %s", tool, c.url, r.Status, r.Body)
	}
	if m := r.final(t); m.Error != nil {
		return m.Error.Message
	}
	return ""
}

// endpointListen opens a 2026-07-28 subscriptions/listen on the default
// endpoint (/mcp) for tool list changes; its messages arrive on the
// channel until the test ends.
func endpointListen(t *testing.T, g *testGateway) <-chan json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"jsonrpc":"2.0","id":"listen","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + crossMeta("") + `}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := g.http.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("listen: %d %s", resp.StatusCode, b)
	}
	ch := make(chan json.RawMessage, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		_, _ = readMessages(resp, func(m json.RawMessage) bool {
			select {
			case ch <- m:
			default:
			}
			return true
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}

// TestReloadEndpointKeepsSessions: a reload that adds, removes or changes
// a server keeps the sessions of the default endpoint (/mcp): the same
// session id serves before and after, its GET stream and a 2026-07-28
// listen hear tools/list_changed, the new member is listed and called, a
// call in flight to a removed member and every later call to it get an
// error naming it, and a changed member serves from its new process.
// (Before, every such reload ended the endpoint's sessions: 404.)
func TestReloadEndpointKeepsSessions(t *testing.T) {
	stamp := time.Now().UnixNano()
	mark := func(name string) string { return fmt.Sprintf("rkeep-%s-%d", name, stamp) }
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{Marker: mark("a")}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	g, logs := startServing(t, cfg, ReloadOptions{})
	ep := g.endpointClient("")
	ep.connect(t)
	session := ep.session
	events, closeGET := openGET(t, ep)
	defer closeGET()
	listen := endpointListen(t, g)
	select { // its acknowledgement: the listen is open
	case <-listen:
	case <-time.After(20 * time.Second):
		t.Fatal("the listen was not acknowledged")
	}
	aPID := pidVia(t, ep, "a__pid")

	// Added: b joins the running session.
	added := cloneConfig(cfg)
	added.Servers["b"] = fakeServer("b", testkit.FakeOptions{Marker: mark("b")})
	added.Endpoints["all"].Servers = []string{"a", "b"}
	sum, err := g.gw.reload(added)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.EndpointsUpdated, []string{"all"}) || len(sum.EndpointsRebuilt) != 0 {
		t.Errorf("summary %+v: want all updated in place, none rebuilt", sum)
	}
	waitMessage(t, events, "notifications/tools/list_changed")
	waitMessage(t, listen, "notifications/tools/list_changed")
	if names := toolNames(t, ep); !slices.Contains(names, "b__echo") || !slices.Contains(names, "a__echo") {
		t.Fatalf("tools after b joined: %v", names)
	}
	if got := pidVia(t, ep, "b__pid"); got == "" || got == aPID {
		t.Errorf("b__pid: %q", got)
	}
	if ep.session != session {
		t.Fatal("the session id changed")
	}

	// Removed: b's call in flight and later calls get an error naming it.
	inFlight := slowInFlightVia(t, ep, "b__slow")
	removed := cloneConfig(added)
	delete(removed.Servers, "b")
	removed.Endpoints["all"].Servers = []string{"a"}
	if _, err := g.gw.reload(removed); err != nil {
		t.Fatal(err)
	}
	const removedText = `server "b" was removed from endpoint "all" by a config reload`
	select {
	case m := <-inFlight:
		if m.Error == nil || !strings.Contains(m.Error.Message, removedText) {
			t.Errorf("call in flight to b: %+v, want an error naming the removal", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call in flight to the removed member got no answer")
	}
	waitMessage(t, events, "notifications/tools/list_changed")
	if msg := callError(t, ep, "3", "b__echo"); !strings.Contains(msg, removedText) {
		t.Errorf("b__echo after b was removed: %q, want %q", msg, removedText)
	}
	if msg := callError(t, ep, "4", "a__echo"); msg != "" {
		t.Errorf("a__echo after b was removed: %q", msg)
	}
	if left := testkit.WaitProcsGone(mark("b"), 10*time.Second); len(left) != 0 {
		t.Errorf("b's process still runs: %+v", left)
	}

	// Changed: a's new process serves the same session.
	changed := cloneConfig(removed)
	changed.Servers["a"] = fakeServer("a", testkit.FakeOptions{Marker: mark("a2")})
	if _, err := g.gw.reload(changed); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a's new process in the session", func() bool {
		r := ep.post(t, callBody("5", "a__pid", map[string]string{}, ""))
		if r.Status != http.StatusOK {
			t.Fatalf("a__pid after a changed: %d %s", r.Status, r.Body)
		}
		m := r.final(t)
		return m.Error == nil && toolText(t, m) != aPID
	})
	if left := testkit.WaitProcsGone(mark("a"), 10*time.Second); len(left) != 0 {
		t.Errorf("a's old process still runs: %+v", left)
	}
	if ep.session != session {
		t.Fatal("the session id changed")
	}
	if l := logs.lines(`msg="members changed in place; sessions kept"`); len(l) != 3 {
		t.Errorf("%d lines about members changed in place, want 3: %q", len(l), l)
	}
}

// slowInFlightVia is slowInFlight on an endpoint's tool.
func slowInFlightVia(t *testing.T, c *mcpClient, tool string) <-chan rpc {
	t.Helper()
	started := make(chan struct{})
	out := make(chan rpc, 1)
	req := c.request(http.MethodPost, callBody("6", tool, map[string]any{"ms": 600000, "started": true}, `{"progressToken":"p"}`))
	go func() {
		r := c.do(t, req, func(m json.RawMessage) {
			if decode(t, m).Method == "notifications/progress" {
				close(started)
			}
		})
		var m rpc
		if len(r.Msgs) > 0 {
			_ = json.Unmarshal(r.Msgs[len(r.Msgs)-1], &m)
		}
		out <- m
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow call did not start")
	}
	return out
}

// TestReloadEndpointSettingsEndSessions: a reload that changes what names
// every item of an endpoint (its separator here) rebuilds it: its sessions
// end (404 after; a call in flight is answered with the reason naming the
// key path, which is logged), and a new session gets the new names. An
// endpoint removed ends its sessions too. A change of an endpoint's
// members alone does not (TestReloadEndpointKeepsSessions).
func TestReloadEndpointSettingsEndSessions(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	cfg.Endpoints["gone"] = config.NewEndpoint("gone", []string{"a"})
	g, logs := startServing(t, cfg, ReloadOptions{})
	ep, gone := g.endpointClient(""), g.endpointClient("gone")
	ep.connect(t)
	gone.connect(t)
	inFlight := slowInFlightVia(t, ep, "a__slow")
	next := cloneConfig(cfg)
	next.Endpoints["all"].Separator = "."
	delete(next.Endpoints, "gone")
	sum, err := g.gw.reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.EndpointsRebuilt, []string{"all"}) || len(sum.EndpointsUpdated) != 0 || !slices.Equal(sum.EndpointsRemoved, []string{"gone"}) {
		t.Errorf("summary %+v: want all rebuilt, gone removed", sum)
	}
	const key = "gateway.endpoints.all.separator"
	select {
	case m := <-inFlight:
		if m.Error == nil || !strings.Contains(m.Error.Message, key) {
			t.Errorf("call in flight on the rebuilt endpoint: %+v, want an error naming %s", m, key)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call in flight on the rebuilt endpoint got no answer")
	}
	for _, c := range []*mcpClient{ep, gone} {
		if r := c.post(t, callBody("2", "a__echo", map[string]string{"message": "x"}, "")); r.Status != http.StatusNotFound {
			t.Errorf("old session on %s after the reload: %d, want 404", c.url, r.Status)
		}
	}
	if l := logs.lines("session closed", "endpoint=gone", reasonEndpointRemoved); len(l) != 1 {
		t.Errorf("no session of gone closed with %q: %q", reasonEndpointRemoved, logs.lines("session closed"))
	}
	if l := logs.lines("endpoint sessions ended by the reload", key); len(l) != 1 {
		t.Errorf("no line naming %s: %q", key, logs.lines("endpoint sessions ended"))
	}
	ep2 := g.endpointClient("")
	ep2.connect(t)
	if names := toolNames(t, ep2); !slices.Contains(names, "a.echo") {
		t.Errorf("tools under the new separator: %v", names)
	}
}

// TestReloadEndpointStartingMemberJoins: a server added by a reload that
// takes a while to start (its command sleeps before it execs the server)
// is not ready when the endpoint's session takes it: it joins the session
// once it is, and the client hears list_changed then.
func TestReloadEndpointStartingMemberJoins(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	g, _ := startServing(t, cfg, ReloadOptions{})
	ep := g.endpointClient("")
	ep.connect(t)
	events, closeGET := openGET(t, ep)
	defer closeGET()
	next := cloneConfig(cfg)
	late := fakeServer("late", testkit.FakeOptions{})
	late.Args = append([]string{"-c", `sleep 1; exec "$0" "$@"`, late.Command}, late.Args...)
	late.Command = "/bin/sh"
	next.Servers["late"] = late
	next.Endpoints["all"].Servers = []string{"a", "late"}
	if _, err := g.gw.reload(next); err != nil {
		t.Fatal(err)
	}
	if ready, _ := g.gw.servers["late"].(interface{ Ready() (bool, string) }).Ready(); ready {
		t.Log("late was ready at once: the test did not wait for it") // the path below still holds
	}
	waitMessage(t, events, "notifications/tools/list_changed")
	testkit.WaitFor(t, "late's tools listed", func() bool { return slices.Contains(toolNames(t, ep), "late__echo") })
	if msg := callError(t, ep, "2", "late__echo"); msg != "" {
		t.Errorf("late__echo: %s", msg)
	}
}
