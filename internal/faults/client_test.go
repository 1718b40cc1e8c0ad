package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file is a small Streamable HTTP client that returns errors instead of
// failing (scenarios call it from many goroutines) and keeps messages raw.

type client struct {
	g       *testGateway
	url     string
	version string
	session string
}

func (g *testGateway) client(server string) *client {
	return &client{g: g, url: g.URL + "/servers/" + server + "/mcp", version: "2025-11-25"}
}

// reply is what one POST returned.
type reply struct {
	Status  int
	Header  http.Header
	Msgs    []json.RawMessage // the JSON body (one or a batch) or the SSE events' data
	EventID []string          // parallel to Msgs for SSE
	Body    []byte            // raw body when it is not JSON-RPC
	Elapsed time.Duration

	byID map[string][]rpc // responses by raw id, built by answers
}

// rpc is the parts of a message scenarios look at.
type rpc = testkit.RPC

func (c *client) request(method, body string) *http.Request {
	req, _ := http.NewRequest(method, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	return req
}

func initializeBody(version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{"sampling":{},"roots":{}},"clientInfo":{"name":"faults","version":"1"}}}`, version)
}

// connect initializes a session, failing the test when it cannot.
func (c *client) connect(t *testing.T) {
	t.Helper()
	if err := c.tryConnect(); err != nil {
		t.Fatal(err)
	}
}

func (c *client) tryConnect() error {
	r, err := c.post(initializeBody(c.version))
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || len(r.Msgs) != 1 || r.final().Error != nil {
		return fmt.Errorf("initialize: status %d, messages %q, body %q", r.Status, r.Msgs, r.Body)
	}
	c.session = r.Header.Get("Mcp-Session-Id")
	if c.session == "" {
		return fmt.Errorf("initialize: no Mcp-Session-Id")
	}
	if r, err := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || r.Status != http.StatusAccepted {
		return fmt.Errorf("notifications/initialized: %v %+v", err, r)
	}
	return nil
}

func (c *client) post(body string) (*reply, error) {
	return c.do(c.request(http.MethodPost, body), nil)
}

// do sends req and reads the whole answer; onEvent sees each SSE message
// as it arrives.
func (c *client) do(req *http.Request, onEvent func(json.RawMessage)) (*reply, error) {
	start := time.Now()
	resp, err := c.g.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := &reply{Status: resp.StatusCode, Header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(resp.Body, 64<<20)
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return r, fmt.Errorf("reading SSE after %d messages: %w", len(r.Msgs), err)
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
		r.Elapsed = time.Since(start)
		return r, nil
	}
	r.Body, err = io.ReadAll(resp.Body)
	r.Elapsed = time.Since(start)
	if err != nil {
		return r, err
	}
	if len(r.Body) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if r.Body[0] == '[' {
			_ = json.Unmarshal(r.Body, &r.Msgs)
		} else {
			r.Msgs = []json.RawMessage{r.Body}
		}
	}
	return r, nil
}

// final returns the last message, the zero rpc if there is none.
func (r *reply) final() rpc {
	if len(r.Msgs) == 0 {
		return rpc{}
	}
	var m rpc
	_ = json.Unmarshal(r.Msgs[len(r.Msgs)-1], &m)
	return m
}

// answers returns the responses (not requests or notifications) among the
// messages whose id is id.
func (r *reply) answers(id string) []rpc {
	if r.byID == nil {
		r.byID = map[string][]rpc{}
		for _, raw := range r.Msgs {
			var m rpc
			if json.Unmarshal(raw, &m) == nil && m.Method == "" && (m.Result != nil || m.Error != nil) {
				r.byID[string(m.ID)] = append(r.byID[string(m.ID)], m)
			}
		}
	}
	return r.byID[id]
}

// answeredOnce checks the invariant for one request: exactly one response
// with its id (result or JSON-RPC error), never a bare 202 or silence.
func answeredOnce(r *reply, err error, id string) error {
	if err != nil {
		return fmt.Errorf("request %s: %w", id, err)
	}
	if n := len(r.answers(id)); n != 1 {
		return fmt.Errorf("request %s: %d responses (status %d, %d messages %.300q, body %.300q)", id, n, r.Status, len(r.Msgs), r.Msgs, r.Body)
	}
	return nil
}

func callBody(id, tool string, args any, meta string) string {
	a, _ := json.Marshal(args)
	if meta != "" {
		meta = `,"_meta":` + meta
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, tool, a, meta)
}

// toolText returns the first text of a tools/call result, or the error.
func toolText(m rpc) (string, error) {
	if m.Error != nil {
		return "", fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
		return "", fmt.Errorf("bad tool result %s", m.Result)
	}
	return res.Content[0].Text, nil
}

// echo calls the echo tool once and checks the answer.
func (c *client) echo(id int, msg string) (time.Duration, error) {
	r, err := c.post(callBody(fmt.Sprint(id), "echo", map[string]string{"message": msg}, ""))
	if err := answeredOnce(r, err, fmt.Sprint(id)); err != nil {
		return 0, err
	}
	text, err := toolText(r.final())
	if err != nil {
		return 0, err
	}
	if text != msg {
		return 0, fmt.Errorf("echo %d: got %q, want %q", id, text, msg)
	}
	return r.Elapsed, nil
}

// latencies measures echo round trips on a healthy server.
type latencies struct {
	mu  sync.Mutex
	d   []time.Duration
	err []error
}

// probe runs n sequential echo calls (or until stop is closed when n is 0).
func (l *latencies) probe(c *client, n int, stop <-chan struct{}) {
	for i := 1; n == 0 || i <= n; i++ {
		if stop != nil {
			select {
			case <-stop:
				// A fault that ends quickly still gets minDuring probe
				// calls: the last ones right behind it, where a server
				// left blocked by the fault would still show.
				l.mu.Lock()
				enough := len(l.d)+len(l.err) >= minDuring
				l.mu.Unlock()
				if enough {
					return
				}
			default:
			}
		}
		d, err := c.echo(i, fmt.Sprintf("probe %d", i))
		l.mu.Lock()
		if err != nil {
			l.err = append(l.err, err)
		} else {
			l.d = append(l.d, d)
		}
		l.mu.Unlock()
		if n == 0 {
			time.Sleep(5 * time.Millisecond) // a steady trickle, not a load test
		}
	}
}

// slowest returns the longest round trip.
func (l *latencies) slowest() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	return slices.Max(l.d)
}

// healthyDuring runs the probe on c while fault runs, and checks that every
// probe call succeeded and that none took as long as requestTimeout: a call
// held behind the faulty server (a shared lock, a full queue, a blocked
// reader) waits for that server's timeout, which only a blocked path
// reaches. How fast the healthy calls are is not checked: the fault and the
// -race binaries share the machine's cores, and a busy machine slows every
// call without blocking any.
func healthyDuring(t *testing.T, c *client, fault func()) {
	t.Helper()
	var before latencies
	before.probe(c, minDuring, nil)
	if len(before.err) > 0 {
		t.Fatalf("healthy server before the fault: %v", before.err[0])
	}
	var during latencies
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		during.probe(c, 0, stop)
	}()
	fault()
	close(stop)
	<-done
	during.mu.Lock()
	n, errs := len(during.d), during.err
	during.mu.Unlock()
	for i, err := range errs {
		if i < 3 {
			t.Errorf("healthy server during the fault: %v", err)
		}
	}
	slowest := during.slowest()
	t.Logf("healthy server echo: slowest %v before, %v during (%d calls)", before.slowest(), slowest, n)
	if n < minDuring {
		t.Errorf("only %d healthy calls completed during the fault", n)
	}
	if slowest >= requestTimeout {
		t.Errorf("a healthy call took %v during the fault, as long as the request timeout %v: it waited on the faulty server", slowest, requestTimeout)
	}
}

// minDuring is how many probe calls of the healthy server run during a
// fault at least (and before it).
const minDuring = 5
