package front

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// statelessBackend is a fakeBackend that serves the stateless revision in
// front of a server whose initialize result is init.
type statelessBackend struct {
	*fakeBackend
	init string
}

func (b statelessBackend) OpenStateless(ctx context.Context, general conn.Stream, _ string, _ []byte) (conn.StatelessConn, error) {
	c, err := b.Open(ctx, general)
	if err != nil {
		return conn.StatelessConn{}, err
	}
	ic := initConn{c.(*fakeConn), b.init}
	return conn.NewStatelessConn(ic, ic.ServerInit, ic.Passthrough()), nil
}

func (b statelessBackend) ServesStateless() bool { return true }

type initConn struct {
	*fakeConn
	init string
}

func (c initConn) ServerInit(context.Context) ([]byte, error) { return []byte(c.init), nil }

func (c initConn) Passthrough() bool { return false }

const testInit = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"fake","version":"1.0"},"instructions":"be kind"}`

func statelessServer(t *testing.T, cfg Config) (*statelessBackend, *Handler, string) {
	t.Helper()
	b := &statelessBackend{newFakeBackend(), testInit}
	cfg.Backends = map[string]conn.Backend{"x": b}
	h, srv := testServer(t, b.fakeBackend, cfg)
	// testServer registered the plain backend: serve the stateless one.
	h.SetTargets(Targets{Backends: map[string]conn.Backend{"x": b}, Endpoints: h.cfg.Endpoints, Policies: h.cfg.Policies, Auth: h.cfg.Auth})
	return b, h, srv.URL
}

// modernBody is a request of the stateless revision.
func modernBody(id, method, params string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"tok"}`
	if params != "" {
		meta = params + "," + meta
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + meta + `}}`
}

func modernPost(t *testing.T, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+mcpPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	var m struct{ Method string }
	_ = json.Unmarshal([]byte(body), &m)
	req.Header.Set("Mcp-Method", m.Method)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, sb.String()
}

// A modern request needs no session: it goes to the server without the
// revision's _meta keys (the progress token stays), and its result comes
// back with resultType and the id byte for byte, as one JSON body.
func TestStatelessRequest(t *testing.T) {
	b, _, url := statelessServer(t, Config{})
	resp, body := modernPost(t, url, modernBody(`"a\u0062"`, "tools/list", ""))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("%d %s session %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Mcp-Session-Id"), body)
	}
	want := `{"jsonrpc":"2.0","id":"a\u0062","result":{"resultType":"complete","ttlMs":0,"cacheScope":"private"}}`
	if !jsonEqual(body, want) || !strings.Contains(body, `"id":"a\u0062"`) {
		t.Errorf("reply %s, want %s", body, want)
	}
	c := testkit.Receive(t, b.conns, "the request's conn")
	c.mu.Lock()
	seen := string(c.seen)
	c.mu.Unlock()
	if strings.Contains(seen, "io.modelcontextprotocol/") || !strings.Contains(seen, `"progressToken":"tok"`) {
		t.Errorf("forwarded %s: want the revision's keys gone, the progress token kept", seen)
	}
	if b.closes.Load() != 1 {
		t.Errorf("%d conns closed after the request, want 1", b.closes.Load())
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// server/discover is answered from the server's initialize result.
func TestStatelessDiscover(t *testing.T) {
	_, _, url := statelessServer(t, Config{})
	resp, body := modernPost(t, url, modernBody("1", "server/discover", ""))
	var r struct {
		ID     int
		Result struct {
			ResultType        string
			SupportedVersions []string
			Capabilities      map[string]any
			Instructions      string
			Meta              map[string]json.RawMessage `json:"_meta"`
		}
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s (%v)", resp.StatusCode, body, err)
	}
	if r.ID != 1 || r.Result.ResultType != "complete" || len(r.Result.SupportedVersions) == 0 || r.Result.SupportedVersions[0] != "2026-07-28" ||
		r.Result.Capabilities["tools"] == nil || r.Result.Capabilities["logging"] != nil || r.Result.Instructions != "be kind" ||
		!strings.Contains(string(r.Result.Meta["io.modelcontextprotocol/serverInfo"]), `"fake"`) {
		t.Errorf("discover: %s", body)
	}
}

// Refusals carry the request's id, the status and code the revision
// names, and say what was wrong.
func TestStatelessRefusals(t *testing.T) {
	_, _, url := statelessServer(t, Config{})
	for _, tc := range []struct {
		name, body string
		hdr        []string
		status     int
		code       int
		text       string
	}{
		{"no Mcp-Method", modernBody("7", "tools/list", ""), []string{"Mcp-Method", ""}, 400, -32020, "Mcp-Method"},
		{"Mcp-Method differs", modernBody("7", "tools/list", ""), []string{"Mcp-Method", "prompts/list"}, 400, -32020, "Mcp-Method"},
		{"version differs", modernBody("7", "tools/list", ""), []string{"MCP-Protocol-Version", "2026-08-01"}, 400, -32020, "MCP-Protocol-Version"},
		{"unsupported version", strings.Replace(modernBody("7", "tools/list", ""), "2026-07-28", "v999.0.0", 1), []string{"MCP-Protocol-Version", "v999.0.0"}, 400, -32022, ""},
		{"ping removed", modernBody("7", "ping", ""), nil, 404, -32601, "ping"},
		{"initialize with modern meta", modernBody("7", "initialize", ""), nil, 404, -32601, "initialize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := modernPost(t, url, tc.body, tc.hdr...)
			var r struct {
				ID    json.RawMessage
				Error struct {
					Code    int
					Message string
					Data    json.RawMessage
				}
			}
			_ = json.Unmarshal([]byte(body), &r)
			if resp.StatusCode != tc.status || r.Error.Code != tc.code || string(r.ID) != "7" || !strings.Contains(r.Error.Message, tc.text) {
				t.Errorf("%d %s: want %d, code %d, id 7, a message naming %q", resp.StatusCode, body, tc.status, tc.code, tc.text)
			}
			if tc.code == -32022 && !strings.Contains(string(r.Error.Data), `"requested":"v999.0.0"`) {
				t.Errorf("data %s: want the requested version", r.Error.Data)
			}
		})
	}
}

// A server run per session has no shared process to serve stateless
// requests: the client is told to initialize, naming the versions it can.
func TestStatelessNeedsSharedServer(t *testing.T) {
	_, srv := testServer(t, newFakeBackend(), Config{})
	resp, body := modernPost(t, srv.URL, modernBody("3", "tools/list", ""))
	if resp.StatusCode != 400 || !strings.Contains(body, `-32022`) || !strings.Contains(body, `"supported":["2025-11-25"`) || !strings.Contains(body, `"id":3`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

// A related message first makes the reply an SSE stream without event ids
// or a priming event (nothing resumes in this revision), and unbuffered.
func TestStatelessStream(t *testing.T) {
	_, _, url := statelessServer(t, Config{})
	resp, body := modernPost(t, url, modernBody("5", "progress", ""))
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("%s %v: %s", resp.Header.Get("Content-Type"), resp.Header, body)
	}
	if strings.Contains(body, "id:") || strings.Contains(body, "retry:") || !strings.Contains(body, "notifications/progress") || !strings.Contains(body, `"resultType":"complete"`) {
		t.Errorf("stream %q: want progress then the reply, no ids, no priming", body)
	}
}

// A client that closes its request's stream cancels the request; shutdown
// answers one still in flight.
func TestStatelessCancelAndShutdown(t *testing.T) {
	b, h, url := statelessServer(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+mcpPath, strings.NewReader(modernBody("9", "hold", "")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "hold")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	c := testkit.Receive(t, b.conns, "the request's conn")
	testkit.Receive(t, c.held, "the request to reach the server")
	cancel()
	<-done
	testkit.WaitFor(t, "the request to be abandoned", func() bool { return b.abandons.Load() > 0 })
	if b.abandons.Load() != 1 {
		t.Fatalf("%d abandons after the client left, want 1", b.abandons.Load())
	}

	got := make(chan string, 1)
	go func() {
		_, body := modernPost(t, url, modernBody("10", "hold", ""))
		got <- body
	}()
	c = testkit.Receive(t, b.conns, "the second request's conn")
	testkit.Receive(t, c.held, "the second request to reach the server")
	h.Close()
	if body := testkit.Receive(t, got, "the answer at shutdown"); !strings.Contains(body, `"id":10`) || !strings.Contains(body, "error") {
		t.Errorf("at shutdown: %s", body)
	}
}

// The server's own refusal gets the status the revision gives it: 404 for
// a method it does not have, as for the methods the revision removed.
func TestStatelessServerErrorStatus(t *testing.T) {
	_, _, url := statelessServer(t, Config{ReplyWait: time.Millisecond})
	resp, body := modernPost(t, url, modernBody("4", "missing", ""))
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `-32601`) || !strings.Contains(body, `"id":4`) {
		t.Errorf("%d %s, want 404 with the server's -32601", resp.StatusCode, body)
	}
	// However long it takes: a stateless reply never turns into a stream
	// for lack of a first message (nothing could resume it), so its status
	// is still the refusal's.
	if resp, body := modernPost(t, url, modernBody("6", "slowMissing", "")); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("a refusal after ReplyWait: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp, body = modernPost(t, url, modernBody("5", "tools/call", `"name":"x"`), "Mcp-Name", "x"); resp.StatusCode != http.StatusOK {
		t.Errorf("a result: %d %s", resp.StatusCode, body)
	}
}

// subscriptions/listen, for a server of the session eras: acknowledged
// first with what the server can deliver, then the matching broadcasts
// tagged with the listen's id; the stream ends with the listen's result
// when the gateway shuts down.
func TestStatelessListen(t *testing.T) {
	b, h, url := statelessServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := modernBody(`"L1"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true,"promptsListChanged":true}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+mcpPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := sseEvents(resp.Body)
	ack := testkit.Receive(t, events, "the acknowledgement")
	if !strings.Contains(ack, `"notifications/subscriptions/acknowledged"`) || !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":"L1"`) ||
		!strings.Contains(ack, `"toolsListChanged":true`) || strings.Contains(ack, "promptsListChanged") {
		t.Fatalf("ack %s: want the listen's id and only toolsListChanged (the server has no prompts)", ack)
	}
	c := testkit.Receive(t, b.conns, "the listen's conn")
	c.general.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`))
	c.general.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	got := testkit.Receive(t, events, "the tools list_changed")
	if !strings.Contains(got, `notifications/tools/list_changed`) || !strings.Contains(got, `"io.modelcontextprotocol/subscriptionId":"L1"`) {
		t.Errorf("delivery %s: want tools/list_changed tagged with L1", got)
	}
	h.Close()
	if end := testkit.Receive(t, events, "the listen's end"); !strings.Contains(end, `"id":"L1"`) || !strings.Contains(end, `"resultType":"complete"`) {
		t.Errorf("end %s: want the listen's result", end)
	}
}

// sseEvents delivers the data of each SSE event read from r.
func sseEvents(r io.Reader) <-chan string {
	out := make(chan string, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- data
			}
		}
	}()
	return out
}

// GET and DELETE without a session: nothing the stateless revision has
// (405, naming what is allowed); a GET asking for SSE is still a legacy
// HTTP+SSE client.
func TestStatelessGETAndDELETE(t *testing.T) {
	b, _, url := statelessServer(t, Config{})
	for _, c := range []struct{ method, accept, allow string }{
		{http.MethodGet, "application/json", "POST"},
		{http.MethodDelete, "", "GET, POST"},
	} {
		req, _ := http.NewRequest(c.method, url+mcpPath, nil)
		req.Header.Set("Accept", c.accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s without a session: %d Allow %q, want 405 Allow %q", c.method, resp.StatusCode, resp.Header.Get("Allow"), c.allow)
		}
	}
	if n := b.opens.Load(); n != 0 {
		t.Errorf("%d sessions opened", n)
	}
}
