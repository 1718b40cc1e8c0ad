package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// modernCall POSTs a tools/call of the stateless revision (2026-07-28) to
// server and returns the status and the reply (a JSON body).
func modernCall(t *testing.T, g *testGateway, server, id, tool string, args map[string]string, extra string) (int, map[string]json.RawMessage) {
	t.Helper()
	a, _ := json.Marshal(args)
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + string(a) + extra +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/servers/"+server+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct == "text/event-stream" {
		// The reply is the last data line.
		lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
		raw = bytes.TrimPrefix(lines[len(lines)-1], []byte("data: "))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("reply %q: %v", raw, err)
	}
	return resp.StatusCode, m
}

// TestStatelessInputRequired: a legacy server that asks the client for
// sampling while serving a 2026-07-28 request: the client gets
// input_required with the server's request and a requestState; its retry
// (a new id, inputResponses, the state) answers the server and gets the
// tool's result. The state opens once, and an altered one not at all.
func TestStatelessInputRequired(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("s", testkit.FakeOptions{})))
	status, m := modernCall(t, g, "s", "1", "sample", map[string]string{"prompt": "capital of France?"}, "")
	var res struct {
		ResultType    string
		InputRequests map[string]struct {
			Method string
			Params json.RawMessage
		}
		RequestState string
	}
	if err := json.Unmarshal(m["result"], &res); err != nil || status != 200 || res.ResultType != "input_required" || res.RequestState == "" || len(res.InputRequests) != 1 {
		t.Fatalf("first answer %d %s", status, m["result"])
	}
	var key string
	for k, r := range res.InputRequests {
		key = k
		if r.Method != "sampling/createMessage" || !strings.Contains(string(r.Params), "capital of France?") {
			t.Fatalf("input request %s: %s %s", k, r.Method, r.Params)
		}
	}
	state, _ := json.Marshal(res.RequestState)
	answer := `,"inputResponses":{"` + key + `":{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"m"}},"requestState":` + string(state)

	// An altered state, or one for another request, does not open.
	tampered := strings.Replace(answer, res.RequestState[:8], "AAAAAAAA", 1)
	if status, m := modernCall(t, g, "s", "2", "sample", map[string]string{"prompt": "capital of France?"}, tampered); status != 400 || !strings.Contains(string(m["error"]), "-32602") {
		t.Errorf("altered state: %d %s %s", status, m["result"], m["error"])
	}
	if status, m := modernCall(t, g, "s", "3", "sample", map[string]string{"prompt": "capital of Spain?"}, answer); status != 400 || !strings.Contains(string(m["error"]), "-32602") {
		t.Errorf("state of another request: %d %s %s", status, m["result"], m["error"])
	}

	status, m = modernCall(t, g, "s", `"retry"`, "sample", map[string]string{"prompt": "capital of France?"}, answer)
	if status != 200 || string(m["id"]) != `"retry"` || !strings.Contains(string(m["result"]), "Paris") || !strings.Contains(string(m["result"]), `"resultType":"complete"`) {
		t.Fatalf("retry: %d id %s %s %s", status, m["id"], m["result"], m["error"])
	}
	if status, m := modernCall(t, g, "s", "5", "sample", map[string]string{"prompt": "capital of France?"}, answer); status != 400 || !strings.Contains(string(m["error"]), "-32602") {
		t.Errorf("state used twice: %d %s %s", status, m["result"], m["error"])
	}
	if n := g.pending("s"); n != 0 {
		t.Errorf("%d requests still pending upstream", n)
	}
}

// TestStatelessInputNeverAnswered: a request answered input_required whose
// client never retries is cancelled upstream after InputWait.
func TestStatelessInputNeverAnswered(t *testing.T) {
	cfg := newConfig(fakeServer("s", testkit.FakeOptions{}))
	cfg.Gateway.InputWait = 200 * time.Millisecond
	g := startGateway(t, cfg)
	status, m := modernCall(t, g, "s", "1", "sample", map[string]string{"prompt": "p"}, "")
	if status != 200 || !strings.Contains(string(m["result"]), "input_required") {
		t.Fatalf("%d %s", status, m["result"])
	}
	testkit.WaitFor(t, "no request pending upstream after InputWait", func() bool { return g.pending("s") == 0 })
}

// TestStatelessCrossfire: many concurrent stateless clients on one shared
// process, every one with the same request ids and progress tokens: each
// gets its own progress and its own reply, nothing crosses, and nothing is
// left pending or recorded afterwards.
func TestStatelessCrossfire(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("s", testkit.FakeOptions{})))
	const clients, calls = 40, 10
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			for i := range calls {
				msg := fmt.Sprintf("client %d call %d", c, i)
				body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + msg +
					`"},"_meta":{"progressToken":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
				req, _ := http.NewRequest(http.MethodPost, g.URL+"/servers/s/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "echo")
				resp, err := g.http.Do(req)
				if err != nil {
					errs <- err
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				// Progress 1..3 then the reply, all on this request's stream.
				if n := strings.Count(string(raw), `"progressToken":"t"`); n != 3 || !strings.Contains(string(raw), `"id":1,`) ||
					!strings.Contains(string(raw), msg+`"`) || strings.Count(string(raw), `"result"`) != 1 {
					errs <- fmt.Errorf("%s: %d progress, body %q", msg, n, raw)
					return
				}
				for other := range clients {
					if other != c && strings.Contains(string(raw), fmt.Sprintf("client %d call", other)) {
						errs <- fmt.Errorf("%s: crossed: %q", msg, raw)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := g.pending("s"); n != 0 {
		t.Errorf("%d requests pending upstream after the crossfire", n)
	}
	if n := g.gw.Handler.Sessions(); n != 0 {
		t.Errorf("%d sessions recorded after every stateless request ended", n)
	}
}

// TestStatelessListenGetsBroadcasts: a listen on a server of the session
// eras gets the server's tools/list_changed (caused by another client's
// call) tagged with its id, and not before its acknowledgement.
func TestStatelessListenGetsBroadcasts(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("s", testkit.FakeOptions{})))
	next := statelessListen(t, g, "s", "7", `{"toolsListChanged":true}`, `{}`)
	if ack := next("acknowledgement"); !strings.Contains(ack, "subscriptions/acknowledged") || !strings.Contains(ack, `"toolsListChanged":true`) {
		t.Fatalf("first message %s", ack)
	}
	if status, m := modernCall(t, g, "s", "1", "list_changed", map[string]string{}, ""); status != 200 {
		t.Fatalf("list_changed call: %d %s", status, m["error"])
	}
	if got := next("tools/list_changed"); !strings.Contains(got, "notifications/tools/list_changed") || !strings.Contains(got, `"io.modelcontextprotocol/subscriptionId":7`) {
		t.Errorf("delivered %s", got)
	}
}

// TestStatelessListenAfterRefusedURI: a listen on a server of the session
// eras whose first resource the server refuses (an empty URI) still gets
// the updates of the resource after it: that one is subscribed upstream,
// not only named in the acknowledgement.
func TestStatelessListenAfterRefusedURI(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("s", testkit.FakeOptions{})))
	// The capabilities modernCall declares: the same translation process.
	next := statelessListen(t, g, "s", `"L"`, `{"resourceSubscriptions":["","file:///a/"]}`, `{"sampling":{}}`)
	if ack := next("acknowledgement"); !strings.Contains(ack, "subscriptions/acknowledged") || !strings.Contains(ack, `"resourceSubscriptions":["file:///a/"]`) {
		t.Fatalf("first message %s", ack)
	}
	if status, m := modernCall(t, g, "s", "1", "touch", map[string]string{"uri": "file:///a/"}, ""); status != 200 {
		t.Fatalf("touch call: %d %s", status, m["error"])
	}
	if got := next("resources/updated"); !strings.Contains(got, "notifications/resources/updated") || !strings.Contains(got, `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Errorf("delivered %s", got)
	}
}

// statelessListen opens subscriptions/listen (id, params.notifications
// filter) on server as a 2026-07-28 client declaring caps, and returns a
// function that waits for the stream's next message, failing the test
// with what after 20 s.
func statelessListen(t *testing.T, g *testGateway, server, id, filter, caps string) func(what string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"notifications":` + filter + `,` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/servers/"+server+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				lines <- data
			}
		}
	}()
	return func(what string) string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-ctx.Done():
			t.Fatalf("no %s", what)
			return ""
		}
	}
}
