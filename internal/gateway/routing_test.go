package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestTimeoutAnswersAndCancelsUpstream: a request over the server's timeout
// gets -32001 and the server gets notifications/cancelled for it.
func TestTimeoutAnswersAndCancelsUpstream(t *testing.T) {
	s := fakeServer("fake", testkit.FakeOptions{})
	s.Timeout = 2 * time.Second // the polls below must fit in it on a busy machine
	g := startGateway(t, newConfig(s))
	c := g.client("fake")
	c.connect(t)
	m := c.post(t, callBody(`"slow-1"`, "slow", map[string]int{"ms": 600000}, "")).final(t)
	if m.Error == nil || m.Error.Code != -32001 || string(m.ID) != `"slow-1"` {
		t.Fatalf("got %+v, want error -32001 for id \"slow-1\"", m)
	}
	var ids []json.RawMessage
	testkit.WaitFor(t, "the server to see the cancellation", func() bool {
		text := toolText(t, c.post(t, callBody("2", "cancelled", map[string]any{}, "")).final(t))
		_ = json.Unmarshal([]byte(text), &ids)
		return len(ids) == 1
	})
}

// TestClientCancelReachesUpstream: notifications/cancelled from the client is
// mapped to the upstream id.
func TestClientCancelReachesUpstream(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)
	done := make(chan *reply, 1)
	go func() { done <- c.post(t, callBody(`"mine"`, "slow", map[string]int{"ms": 600000}, "")) }()
	testkit.WaitFor(t, "the slow call to be in flight", func() bool { return g.pending("fake") == 1 })
	if r := c.post(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"mine","reason":"changed my mind"}}`); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: status %d", r.Status)
	}
	if r := <-done; len(r.Msgs) != 0 {
		t.Fatalf("a cancelled request got %s", r.Msgs)
	}
	text := toolText(t, c.post(t, callBody("2", "cancelled", map[string]any{}, "")).final(t))
	if text == "[]" || strings.Contains(text, "mine") {
		t.Fatalf("upstream saw cancellations %s, want the gateway's id", text)
	}
}

// TestSamplingGoesToTheCaller: a server->client request made while exactly
// one session has a request in flight reaches that session, on that
// request's stream, with a gateway id, and its answer gets back.
func TestSamplingGoesToTheCaller(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	a, b := g.client("fake"), g.client("fake")
	a.connect(t)
	b.connect(t)
	bGET, closeB := openGET(t, b)
	defer closeB()

	req := a.request(http.MethodPost, callBody("7", "sample", map[string]string{"prompt": "hello"}, ""))
	r := a.do(t, req, func(raw json.RawMessage) {
		m := decode(t, raw)
		if m.Method != "sampling/createMessage" {
			return
		}
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"sampled for a"},"model":"m"}}`, m.ID)
		if r := a.post(t, answer); r.Status != http.StatusAccepted {
			t.Errorf("answer: status %d", r.Status)
		}
	})
	if !r.SSE {
		t.Fatal("the sampling request did not come on the call's SSE stream")
	}
	if got := toolText(t, r.final(t)); got != "sampled for a" {
		t.Fatalf("tool result %q", got)
	}
	// b's standalone stream saw nothing: prove ordering with a broadcast.
	if got := toolText(t, b.post(t, callBody("1", "list_changed", map[string]any{}, "")).final(t)); got != "ok" {
		t.Fatal(got)
	}
	if m := next(t, bGET); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("b got %s before the broadcast", m.Method)
	}
}

// TestAmbiguousServerRequestIsRefused: with two sessions in flight, a
// sampling request cannot be attributed; the server gets an error.
func TestAmbiguousServerRequestIsRefused(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	a, b := g.client("fake"), g.client("fake")
	a.connect(t)
	b.connect(t)
	slow := make(chan *reply, 1)
	go func() { slow <- b.post(t, callBody("1", "slow", map[string]int{"ms": 600000}, "")) }()
	testkit.WaitFor(t, "b's call to be in flight", func() bool { return g.pending("fake") == 1 })
	m := a.post(t, callBody("2", "sample", map[string]string{"prompt": "x"}, "")).final(t)
	var res struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(m.Result, &res)
	if !res.IsError || !strings.Contains(string(m.Result), "cannot route") {
		t.Fatalf("sample with two sessions in flight: %s", m.Result)
	}
	if r := b.do(t, b.request(http.MethodDelete, ""), nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", r.Status)
	}
	<-slow
}

// TestSubscriptionsAndBroadcasts: resource updates reach only subscribers;
// list_changed reaches everyone.
func TestSubscriptionsAndBroadcasts(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	cs := []*mcpClient{g.client("fake"), g.client("fake"), g.client("fake")}
	var streams []<-chan json.RawMessage
	for _, c := range cs {
		c.connect(t)
		ch, closeGET := openGET(t, c)
		defer closeGET()
		streams = append(streams, ch)
	}
	sub := func(c *mcpClient, method string) {
		m := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"uri":"test://a"}}`).final(t)
		if m.Error != nil {
			t.Fatalf("%s: %s", method, m.Error.Message)
		}
	}
	sub(cs[0], "resources/subscribe")
	sub(cs[1], "resources/subscribe")
	touch := func() {
		if got := toolText(t, cs[2].post(t, callBody("1", "touch", map[string]string{"uri": "test://a"}, "")).final(t)); got != "touched" {
			t.Fatal(got)
		}
	}
	touch()
	for i := range 2 {
		if m := next(t, streams[i]); m.Method != "notifications/resources/updated" {
			t.Fatalf("subscriber %d got %s", i, m.Method)
		}
	}
	sub(cs[0], "resources/unsubscribe")
	touch()
	if m := next(t, streams[1]); m.Method != "notifications/resources/updated" {
		t.Fatalf("remaining subscriber got %s", m.Method)
	}
	toolText(t, cs[0].post(t, callBody("1", "list_changed", map[string]any{}, "")).final(t))
	for i, ch := range streams {
		if m := next(t, ch); m.Method != "notifications/tools/list_changed" {
			t.Fatalf("session %d: got %s, want list_changed (no stray update first)", i, m.Method)
		}
	}
}

// TestLoggingLevels: the server gets the most verbose level asked for; each
// session gets only messages at or above its own level.
func TestLoggingLevels(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	a, b := g.client("fake"), g.client("fake")
	a.connect(t)
	b.connect(t)
	for c, level := range map[*mcpClient]string{a: "error", b: "debug"} {
		if m := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"`+level+`"}}`).final(t); m.Error != nil {
			t.Fatal(m.Error.Message)
		}
	}
	if got := toolText(t, a.post(t, callBody("1", "level", map[string]any{}, "")).final(t)); got != "debug" {
		t.Fatalf("upstream level %q, want debug", got)
	}
	info := a.post(t, callBody("2", "log", map[string]string{"level": "info", "message": "m1"}, ""))
	if len(info.Msgs) != 1 {
		t.Fatalf("a (level error) got an info message: %s", info.Msgs)
	}
	bad := a.post(t, callBody("3", "log", map[string]string{"level": "error", "message": "m2"}, ""))
	if len(bad.Msgs) != 2 || decode(t, bad.Msgs[0]).Method != "notifications/message" {
		t.Fatalf("a did not get its error message: %s", bad.Msgs)
	}
}

// TestResumeWithLastEventID: a client that drops a POST's SSE stream mid-call
// resumes it with GET and Last-Event-ID and gets the rest, reply included.
func TestResumeWithLastEventID(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)
	events, closePOST := openStream(t, c, c.request(http.MethodPost, callBody("5", "sample", map[string]string{"prompt": "p"}, "")))
	m := next(t, events)
	closePOST()
	if m.Method != "sampling/createMessage" {
		t.Fatalf("first event %s", m.Method)
	}
	lastID := c.lastEventID
	if r := c.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"resumed"},"model":"m"}}`, m.ID)); r.Status != http.StatusAccepted {
		t.Fatalf("answer: %d", r.Status)
	}
	var r *reply
	testkit.WaitFor(t, "the dropped stream to be resumable", func() bool {
		req := getRequest(c)
		req.Header.Set("Last-Event-ID", lastID)
		r = c.do(t, req, nil)
		return r.Status != http.StatusConflict
	})
	if r.Status != http.StatusOK {
		t.Fatalf("resume: status %d %s", r.Status, r.Body)
	}
	if got := toolText(t, r.final(t)); got != "resumed" {
		t.Fatalf("resumed stream ended with %q", got)
	}
}

// TestSessionModeForwardsInitialize: in session mode the client's own
// initialize reaches its own process, so the version is exactly negotiated.
func TestSessionModeForwardsInitialize(t *testing.T) {
	s := fakeServer("iso", testkit.FakeOptions{})
	s.Isolation = config.IsolationSession
	g := startGateway(t, newConfig(s))
	c := g.client("iso")
	c.version = "2025-06-18"
	r := c.post(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	m := r.final(t)
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || string(m.ID) != `"init"` {
		t.Fatalf("initialize reply %s", r.Msgs)
	}
	if res.ProtocolVersion != "2025-06-18" || res.ServerInfo.Name != "mcptest-fake" {
		t.Fatalf("initialize result %s", m.Result)
	}
}

// TestDisconnectCancelsUnresumable: a 2025-06-18 client waiting for a JSON
// reply that disconnects has its request cancelled upstream.
func TestDisconnectCancelsUnresumable(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.version = "2025-06-18"
	c.connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	req := c.request(http.MethodPost, callBody("1", "slow", map[string]int{"ms": 600000}, "")).WithContext(ctx)
	errc := make(chan error, 1)
	go func() {
		resp, err := c.g.http.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	testkit.WaitFor(t, "the slow call to be in flight", func() bool { return g.pending("fake") == 1 })
	cancel()
	<-errc
	testkit.WaitFor(t, "the request to be cancelled upstream", func() bool {
		return g.pending("fake") == 0 &&
			toolText(t, c.post(t, callBody("2", "cancelled", map[string]any{}, "")).final(t)) != "[]"
	})
}

// TestShutdownDrainsInFlight: a request in flight when the gateway is told
// to stop still gets its result, and the gateway then exits cleanly.
func TestShutdownDrainsInFlight(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)
	got := make(chan rpc, 1)
	go func() { got <- c.post(t, callBody("1", "slow", map[string]int{"ms": 300}, "")).final(t) }()
	testkit.WaitFor(t, "the call to be in flight", func() bool { return g.pending("fake") == 1 })
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if text := toolText(t, <-got); text != "done" {
		t.Fatalf("in-flight call during shutdown: %q", text)
	}
}
