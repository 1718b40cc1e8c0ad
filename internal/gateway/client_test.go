package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file is a minimal Streamable HTTP client for the gateway's tests. It
// keeps every message raw so tests can compare ids byte for byte.

// testGateway is a gateway serving on a loopback port for one test.
type testGateway struct {
	URL  string // base, e.g. http://127.0.0.1:PORT
	stop func() error
	http *http.Client
	gw   *Gateway
}

// pending returns the requests in flight upstream on a server.
func (g *testGateway) pending(server string) int { return g.gw.servers[server].Pending() }

// startGateway runs a gateway for cfg until the test ends (or stop is called).
func startGateway(t *testing.T, cfg *config.Config) *testGateway {
	t.Helper()
	return startGatewayAuth(t, cfg, nil)
}

// startGatewayAuth is startGateway with Authenticator a (nil: the
// config's).
func startGatewayAuth(t *testing.T, cfg *config.Config, a auth.Authenticator) *testGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var gw *Gateway
	if a == nil {
		gw, err = Start(cfg, testLogger(t))
	} else {
		gw, err = start(cfg, testLogger(t), a)
	}
	if err != nil {
		t.Fatal(err)
	}
	return serveTest(t, gw, ln, gw.serve)
}

// serveTest serves started gateway gw on ln with serve (gw.serve, or a
// variant of it) until the test ends or stop is called.
func serveTest(t *testing.T, gw *Gateway, ln net.Listener, serve func(context.Context, net.Listener) error) *testGateway {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	// Both ends of every connection live in this process: bound them well
	// under the open-file limit. Calls beyond it wait for a connection.
	tr := &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 2000}
	var once sync.Once
	var stopErr error
	g := &testGateway{URL: "http://" + ln.Addr().String(), http: &http.Client{Transport: tr}, gw: gw}
	g.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = fmt.Errorf("gateway did not stop within 30s")
			}
			tr.CloseIdleConnections()
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Errorf("gateway stop: %v", err)
		}
	})
	return g
}

// fakeServer returns a server entry running the test binary as a fake MCP server.
func fakeServer(name string, opts testkit.FakeOptions) *config.Server {
	cmd, args, env := testkit.Command(opts)
	gw := config.Defaults()
	s := gw.NewServer(name)
	s.Command, s.Args = cmd, args
	s.Env = map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		s.Env[k] = v
	}
	return s
}

func newConfig(servers ...*config.Server) *config.Config {
	cfg := config.Default()
	cfg.Servers = map[string]*config.Server{}
	for _, s := range servers {
		cfg.Servers[s.Name] = s
	}
	return cfg
}

// reply is what one POST returned.
type reply struct {
	Status  int
	Header  http.Header
	Msgs    []json.RawMessage // JSON body (one or a batch) or the SSE events' data, in order
	SSE     bool
	EventID []string // SSE event ids, parallel to Msgs
	Body    []byte   // raw body when not JSON-RPC
}

// mcpClient is one session.
type mcpClient struct {
	g       *testGateway
	url     string
	session string
	version string
	header  http.Header

	lastEventID string // of the last message openStream delivered
}

func (g *testGateway) client(server string) *mcpClient {
	return &mcpClient{g: g, url: g.URL + "/servers/" + server + "/mcp", version: "2025-11-25", header: http.Header{}}
}

// connect initializes the session.
func (c *mcpClient) connect(t testing.TB) {
	t.Helper()
	r := c.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{"sampling":{},"roots":{}},"clientInfo":{"name":"test","version":"1"}}}`, c.version))
	if r.Status != http.StatusOK || len(r.Msgs) != 1 {
		t.Fatalf("initialize: status %d, %d messages, body %s", r.Status, len(r.Msgs), r.Body)
	}
	c.session = r.Header.Get("Mcp-Session-Id")
	if c.session == "" {
		t.Fatalf("initialize: no Mcp-Session-Id")
	}
	if r := c.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.Status != http.StatusAccepted {
		t.Fatalf("initialized: status %d", r.Status)
	}
}

func (c *mcpClient) request(method, body string) *http.Request {
	req, _ := http.NewRequest(method, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	return req
}

// post sends body and reads the whole answer.
func (c *mcpClient) post(t testing.TB, body string) *reply {
	t.Helper()
	return c.do(t, c.request(http.MethodPost, body), nil)
}

// do sends req; onEvent, if set, sees each SSE message as it arrives (to
// answer server requests mid-stream).
func (c *mcpClient) do(t testing.TB, req *http.Request, onEvent func(json.RawMessage)) *reply {
	t.Helper()
	resp, err := c.g.http.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", req.Method, err)
	}
	defer resp.Body.Close()
	r := &reply{Status: resp.StatusCode, Header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r.SSE = true
		rd := sse.NewReader(resp.Body, 0)
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("reading SSE: %v", err)
			}
			if len(ev.Data) == 0 {
				continue // priming event
			}
			r.Msgs = append(r.Msgs, json.RawMessage(bytes.Clone(ev.Data)))
			r.EventID = append(r.EventID, ev.ID)
			if onEvent != nil {
				onEvent(r.Msgs[len(r.Msgs)-1])
			}
		}
		return r
	}
	r.Body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	if len(r.Body) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if r.Body[0] == '[' {
			_ = json.Unmarshal(r.Body, &r.Msgs)
		} else {
			r.Msgs = []json.RawMessage{r.Body}
		}
	}
	return r
}

// rpc is the parts of a message tests look at.
type rpc = testkit.RPC

func decode(t testing.TB, raw json.RawMessage) rpc {
	t.Helper()
	var m rpc
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("bad message %s: %v", raw, err)
	}
	return m
}

// final returns the last message of a reply, which must be a response.
func (r *reply) final(t testing.TB) rpc {
	t.Helper()
	if len(r.Msgs) == 0 {
		t.Fatalf("no messages (status %d, body %q)", r.Status, r.Body)
	}
	return decode(t, r.Msgs[len(r.Msgs)-1])
}

// toolText returns the first text content of a tools/call result.
func toolText(t testing.TB, m rpc) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("tool call failed: %d %s", m.Error.Code, m.Error.Message)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("bad tool result %s", m.Result)
	}
	return res.Content[0].Text
}

func callBody(id, tool string, args any, meta string) string {
	a, _ := json.Marshal(args)
	if meta != "" {
		meta = `,"_meta":` + meta
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, tool, a, meta)
}
