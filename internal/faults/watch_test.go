package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file holds what the scenarios on the mux's and the limiter's
// bookkeeping share (vanish_test.go, restart_test.go, slots_test.go): a
// session's standalone stream watched while it is open, a session's level
// and subscriptions, and what the server process and the gateway's
// metrics say they hold.

// watcher is a session's standalone (GET) stream, its messages collected
// while it is open. An open stream keeps its session from going idle.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	msgs   []json.RawMessage // guarded by mu
}

// watch opens c's standalone stream. The test's cleanup closes it.
func watch(t *testing.T, c *client) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := c.request(http.MethodGet, "").WithContext(ctx)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.g.tr.RoundTrip(req) // no client timeout: it lives until stop
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET stream: %v %+v", err, resp)
	}
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer resp.Body.Close()
		rd := sse.NewReader(resp.Body, 0)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			if len(ev.Data) == 0 {
				continue // priming event
			}
			w.mu.Lock()
			w.msgs = append(w.msgs, json.RawMessage(bytes.Clone(ev.Data)))
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// stop closes the stream (the client drops the connection) and waits for
// its reader. Safe to call more than once.
func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// updates returns how many notifications/resources/updated for uri the
// stream got.
func (w *watcher) updates(uri string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, raw := range w.msgs {
		var m struct {
			Method string `json:"method"`
			Params struct {
				URI string `json:"uri"`
			} `json:"params"`
		}
		if json.Unmarshal(raw, &m) == nil && m.Method == "notifications/resources/updated" && m.Params.URI == uri {
			n++
		}
	}
	return n
}

// rpcIDs numbers the requests of these scenarios' helpers: every id is new,
// so that no two requests of a session are ever in flight with one id.
var rpcIDs atomic.Int64

// call sends a request of method with params and returns its result's
// raw JSON, or an error (the request not answered exactly once, or a
// JSON-RPC error).
func (c *client) call(method, params string) (json.RawMessage, error) {
	id := strconv.FormatInt(rpcIDs.Add(1), 10)
	r, err := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params))
	if err := answeredOnce(r, err, id); err != nil {
		return nil, err
	}
	m := r.answers(id)[0]
	if m.Error != nil {
		return nil, fmt.Errorf("%s: error %d: %s", method, m.Error.Code, m.Error.Message)
	}
	return m.Result, nil
}

// tool calls tool with args and returns its text; with notes, also the
// notifications/message that came with the reply.
func (c *client) tool(name string, args any) (text string, notes int, err error) {
	id := strconv.FormatInt(rpcIDs.Add(1), 10)
	r, err := c.post(callBody(id, name, args, ""))
	if err := answeredOnce(r, err, id); err != nil {
		return "", 0, err
	}
	for _, raw := range r.Msgs {
		var m rpc
		if json.Unmarshal(raw, &m) == nil && m.Method == "notifications/message" {
			notes++
		}
	}
	text, err = toolText(r.answers(id)[0])
	return text, notes, err
}

// join connects c, opens its standalone stream at once (before anything
// else, so that it is never idle), sets its logging level unless level is
// "", and subscribes it to uris.
func join(t *testing.T, c *client, level string, uris ...string) *watcher {
	t.Helper()
	c.connect(t)
	w := watch(t, c)
	if level != "" {
		if _, err := c.call("logging/setLevel", fmt.Sprintf(`{"level":%q}`, level)); err != nil {
			t.Fatal(err)
		}
	}
	for _, uri := range uris {
		if _, err := c.call("resources/subscribe", fmt.Sprintf(`{"uri":%q}`, uri)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// del DELETEs c's session and returns the status.
func (c *client) del() (int, error) {
	resp, err := c.g.hc.Do(c.request(http.MethodDelete, ""))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// mustDelete DELETEs c's session, which must be there.
func mustDelete(t *testing.T, c *client) {
	t.Helper()
	if status, err := c.del(); err != nil || status != http.StatusNoContent {
		t.Fatalf("DELETE: %v status %d, want 204", err, status)
	}
}

// serverHolds returns what the server process behind c holds: its
// subscriptions (a sorted JSON array) and its logging level, as the fake's
// subscribed and level tools tell.
func serverHolds(c *client) (string, error) {
	subs, _, err := c.tool("subscribed", map[string]any{})
	if err != nil {
		return "", err
	}
	level, _, err := c.tool("level", map[string]any{})
	if err != nil {
		return "", err
	}
	return "subscribed " + subs + ", level " + strconv.Quote(level), nil
}

// holds is serverHolds' text for subscriptions uris and level.
func holds(level string, uris ...string) string {
	if uris == nil {
		uris = []string{}
	}
	b, _ := json.Marshal(uris)
	return "subscribed " + string(b) + ", level " + strconv.Quote(level)
}

// eventually waits (testkit.WaitFor) for cond, and says what it saw last
// if that never came.
func eventually(t *testing.T, what string, cond func() (got string, ok bool)) {
	t.Helper()
	var got string
	ok := false
	defer func() {
		if !ok {
			t.Logf("%s: last seen: %s", what, got)
		}
	}()
	testkit.WaitFor(t, what, func() bool {
		var done bool
		got, done = cond()
		return done
	})
	ok = true
}

// waitHolds waits until the server process behind c holds want.
func waitHolds(t *testing.T, c *client, want string) {
	t.Helper()
	eventually(t, "the server to hold "+want, func() (string, bool) {
		got, err := serverHolds(c)
		if err != nil {
			return err.Error(), false
		}
		return got, got == want
	})
}

// metric sums the samples of the gateway's metric name (Prometheus text)
// whose labels include every one of labels (`target="res"`).
func (g *testGateway) metric(name string, labels ...string) (float64, error) {
	resp, err := g.hc.Get(g.URL + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: status %d, %v", resp.StatusCode, err)
	}
	sum := 0.0
lines:
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		for _, want := range labels {
			if !strings.Contains(l, want) {
				continue lines
			}
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %v", l, err)
		}
		sum += v
	}
	return sum, nil
}

// waitSessions waits until target has n established sessions.
func waitSessions(t *testing.T, g *testGateway, target string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d sessions of %s", n, target), func() (string, bool) {
		v, err := g.metric("mcpgate_sessions", `kind="server"`, `target="`+target+`"`)
		if err != nil {
			return err.Error(), false
		}
		return fmt.Sprint(v), int(v) == n
	})
}
