package aggregate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	testkit.Main()
	goleak.VerifyTestMain(m)
}

// wait is the failure bound of every wait: generous, never a delay. A
// 20,000-tool list under -race on a machine with every core busy took more
// than 30 s.
const wait = testkit.WaitTimeout

// logBuffer collects log lines, for the tests that check what is logged.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	t   testing.TB
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLog(t testing.TB) (*slog.Logger, *logBuffer) {
	b := &logBuffer{t: t}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo})), b
}

// fakeMember starts a shared server running the testkit fake and returns
// it as a member named name, prefixed with its name.
func fakeMember(t *testing.T, name string, opts testkit.FakeOptions) Member {
	t.Helper()
	return fakeMemberWith(t, name, opts, nil)
}

// fakeMemberWith is fakeMember with the server's config adjusted by edit.
func fakeMemberWith(t *testing.T, name string, opts testkit.FakeOptions, edit func(*config.Server)) Member {
	t.Helper()
	cmd, args, env := testkit.Command(opts)
	g := config.Defaults()
	cfg := g.NewServer(name)
	cfg.Command, cfg.Args, cfg.Env = cmd, args, map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		cfg.Env[k] = v
	}
	if edit != nil {
		edit(cfg)
	}
	log, _ := newLog(t)
	srv, err := servers.New(cfg, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	// As the gateway does: one process answers every session's lists.
	m := Member{Name: name, Backend: srv, Prefix: name, SharedLists: cfg.Isolation == config.IsolationShared}
	// What the gateway polls: a shared server's readiness.
	if r, ok := srv.(interface{ Ready() (bool, string) }); ok {
		m.State = r.Ready
	}
	return m
}

// marker returns a marker unique to the test and a member.
func marker(t *testing.T, member string) string {
	return fmt.Sprintf("agg-%s-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), member, time.Now().UnixNano())
}

// newEndpoint builds an endpoint and closes it at the end of the test.
func newEndpoint(t *testing.T, opts Options, members ...Member) *Endpoint {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "ep"
	}
	if opts.Logger == nil {
		opts.Logger, _ = newLog(t)
	}
	e, err := New(opts, members)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// stream records what a client stream receives.
type stream struct {
	mu      sync.Mutex
	sends   [][]byte
	replies [][]byte
	sent    chan []byte // every Send, in order
	replied chan []byte // every Reply
}

func newStream() *stream {
	return &stream{sent: make(chan []byte, 1000), replied: make(chan []byte, 100)}
}

func (s *stream) Send(msg []byte) {
	s.mu.Lock()
	s.sends = append(s.sends, msg)
	s.mu.Unlock()
	select {
	case s.sent <- msg:
	default:
	}
}

func (s *stream) Reply(msg []byte) {
	s.mu.Lock()
	s.replies = append(s.replies, msg)
	s.mu.Unlock()
	s.replied <- msg
}

// replyCount returns how many replies the stream got.
func (s *stream) replyCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}

// reply waits for the stream's reply.
func (s *stream) reply(t *testing.T) []byte {
	t.Helper()
	select {
	case r := <-s.replied:
		return r
	case <-time.After(wait):
		t.Fatal("no reply")
		return nil
	}
}

// next waits for the next message sent (not a reply).
func (s *stream) next(t *testing.T) []byte {
	t.Helper()
	select {
	case m := <-s.sent:
		return m
	case <-time.After(wait):
		t.Fatal("nothing sent")
		return nil
	}
}

// waitNotification waits for a notification with method on the stream,
// skipping others.
func (s *stream) waitNotification(t *testing.T, method string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case m := <-s.sent:
			if strings.Contains(string(m), `"method":"`+method+`"`) {
				return
			}
		case <-deadline:
			t.Fatalf("no %s", method)
		}
	}
}

// client is one client session of an endpoint.
type client struct {
	t       *testing.T
	conn    conn.Conn
	general *stream
	init    []byte // the initialize result
}

// connect opens a session and initializes it, declaring caps.
func connect(t *testing.T, e *Endpoint, caps string) *client {
	t.Helper()
	general := newStream()
	c, err := e.Open(context.Background(), general)
	if err != nil {
		t.Fatal(err)
	}
	cl := &client{t: t, conn: c, general: general}
	t.Cleanup(c.Close)
	cl.init = cl.result(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + caps + `,"clientInfo":{"name":"t","version":"1"}}}`)
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	return cl
}

// handle hands the client's message to the session.
func (cl *client) handle(raw string, out *stream) {
	cl.t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		cl.t.Fatalf("%s: %v", raw, err)
	}
	var o conn.Conn = cl.conn
	if out == nil {
		o.Handle(context.Background(), &m, nil)
		return
	}
	o.Handle(context.Background(), &m, out)
}

// send sends a request and returns its stream.
func (cl *client) send(raw string) *stream {
	cl.t.Helper()
	out := newStream()
	cl.handle(raw, out)
	return out
}

// do sends a request and returns its reply.
func (cl *client) do(raw string) []byte {
	cl.t.Helper()
	return cl.send(raw).reply(cl.t)
}

// result sends a request and returns its result, failing on an error.
func (cl *client) result(raw string) []byte {
	cl.t.Helper()
	r := cl.do(raw)
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r, &env); err != nil || env.Result == nil {
		cl.t.Fatalf("%s: reply %s, want a result", raw, r)
	}
	return env.Result
}

// callTool calls a tool with arguments (JSON) and returns the reply.
func (cl *client) callTool(id int, name, args string) []byte {
	cl.t.Helper()
	return cl.do(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args))
}

// text returns the text of a tool call's (or prompt's) first content
// block, or the error message of an error reply.
func text(t *testing.T, reply []byte) string {
	t.Helper()
	var r struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			Messages []struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
	switch {
	case r.Error != nil:
		return fmt.Sprintf("error %d: %s", r.Error.Code, r.Error.Message)
	case len(r.Result.Content) > 0:
		return r.Result.Content[0].Text
	case len(r.Result.Messages) > 0:
		return r.Result.Messages[0].Content.Text
	}
	return string(reply)
}

// listAll follows a merged list's cursors and returns the names (or URIs)
// of every item and the sizes of the pages.
func (cl *client) listAll(method, field, key string) (keys []string, pages []int) {
	cl.t.Helper()
	cursor := ""
	for n := 0; ; n++ {
		params := "{}"
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		res := cl.result(fmt.Sprintf(`{"jsonrpc":"2.0","id":"list-%d","method":%q,"params":%s}`, n, method, params))
		var r map[string]json.RawMessage
		if err := json.Unmarshal(res, &r); err != nil {
			cl.t.Fatal(err)
		}
		var items []map[string]any
		if err := json.Unmarshal(r[field], &items); err != nil {
			cl.t.Fatalf("%s: %s: %v", method, res, err)
		}
		for _, it := range items {
			keys = append(keys, it[key].(string))
		}
		pages = append(pages, len(items))
		cursor = ""
		if next, ok := r["nextCursor"]; ok {
			_ = json.Unmarshal(next, &cursor)
		}
		if cursor == "" {
			return keys, pages
		}
		if n > 1000 {
			cl.t.Fatal("the cursors never end")
		}
	}
}

func (cl *client) tools() []string {
	keys, _ := cl.listAll("tools/list", "tools", "name")
	return keys
}

// waitReady waits until each member's shared process is ready (its
// initialize answered), for tests whose short Timeout is about a call or
// a list, not about a start on a busy machine.
func waitReady(t *testing.T, members ...Member) {
	t.Helper()
	for _, m := range members {
		if m.State == nil {
			continue
		}
		testkit.WaitFor(t, m.Name+" to be ready", func() bool { ok, _ := m.State(); return ok })
	}
}
