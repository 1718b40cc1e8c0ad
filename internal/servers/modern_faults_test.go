package servers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attack tests of shared.go's second process, against a scripted child:
// the test binary itself, started with ATKFAKE set (see init). A process
// whose first request is initialize is a well-behaved session-era server;
// one whose first request is server/discover behaves as the next of
// ATKFAKE_MODES (one per such start, the last repeating):
//
//	modern    answers discover listing 2026-07-28
//	legacy    answers discover -32601
//
// Tools: echo {message}, slow {ms}, crash. subscriptions/listen is
// acknowledged (tagged) and ends with a tagged final result on the
// client's notifications/cancelled.

func init() {
	if os.Getenv("ATKFAKE") == "" {
		return
	}
	atkFakeMain()
	os.Exit(0)
}

func atkFakeMain() {
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	var mu sync.Mutex
	write := func(s string) {
		mu.Lock()
		out.WriteString(s)
		out.WriteByte('\n')
		out.Flush()
		mu.Unlock()
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	first := true
	mode := ""
	listens := map[string]bool{}
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				RequestID json.RawMessage `json:"requestId"`
				Arguments struct {
					Message string `json:"message"`
					MS      int    `json:"ms"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil {
			continue
		}
		id := string(msg.ID)
		if first && msg.Method != "" {
			first = false
			if msg.Method == "server/discover" {
				mode = atkNextMode()
			}
		}
		switch msg.Method {
		case "initialize":
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"atk","version":"1"}}}`)
		case "server/discover":
			modern := `{"jsonrpc":"2.0","id":` + id + `,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}}`
			switch mode {
			case "modern", "":
				write(modern)
			case "legacy":
				write(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"Method not found"}}`)
			}
		case "tools/call":
			switch msg.Params.Name {
			case "crash":
				os.Exit(3)
			case "slow":
				go func() {
					time.Sleep(time.Duration(msg.Params.Arguments.MS) * time.Millisecond)
					write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"slept"}]}}`)
				}()
			default:
				b, _ := json.Marshal(msg.Params.Arguments.Message)
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"resultType":"complete","content":[{"type":"text","text":` + string(b) + `}]}}`)
			}
		case "subscriptions/listen":
			listens[id] = true
			write(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}}}`)
		case "notifications/cancelled":
			rid := string(msg.Params.RequestID)
			if listens[rid] {
				delete(listens, rid)
				write(`{"jsonrpc":"2.0","id":` + rid + `,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":` + rid + `}}}`)
			}
		default:
			if msg.ID != nil && msg.Method != "" {
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
			}
		}
	}
}

// atkNextMode counts discover-first starts in ATKFAKE_COUNT.
func atkNextMode() string {
	path := os.Getenv("ATKFAKE_COUNT")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		f.WriteString("x")
		f.Close()
	}
	b, _ := os.ReadFile(path)
	modes := strings.Split(os.Getenv("ATKFAKE_MODES"), ",")
	n := len(b) - 1
	if n >= len(modes) {
		n = len(modes) - 1
	}
	return modes[max(n, 0)]
}

func atkServer(t *testing.T, name, modes, protocol string) (Server, string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("atk-%s-%d", name, time.Now().UnixNano())
	count := filepath.Join(t.TempDir(), "starts")
	cfg := testServer(name)
	cfg.Command, cfg.Args = exe, []string{"-test.run=^$", "-atk=" + marker}
	cfg.Env = map[string]string{"ATKFAKE": "1", "ATKFAKE_MODES": modes, "ATKFAKE_COUNT": count, "GORACE": "atexit_sleep_ms=0"}
	cfg.Protocol = protocol
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if left := testkit.WaitProcsGone(marker, 5*time.Second); len(left) > 0 {
			t.Errorf("processes left after Close: %v", left)
		}
	})
	return s, marker, count
}

func atkOpen(t *testing.T, s Server) conn.StatelessConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.OpenStateless(ctx, newRecorder(), protocol.StatelessVersion, []byte(`{}`))
	if err != nil {
		t.Fatalf("OpenStateless: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func atkHandle(t *testing.T, c conn.Conn, raw string, out *recorder) {
	t.Helper()
	msg, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	c.Handle(context.Background(), &msg, out)
}

// sessionEcho checks that the sessions' process serves.
func sessionEcho(t *testing.T, s Server, text string) {
	t.Helper()
	sess, err := s.Open(context.Background(), newStream())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out := newStream()
	handle(t, sess, initialize, out)
	out.next(t)
	handle(t, sess, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`+text+`"}}}`, out)
	if got := toolText(string(out.next(t))); got != text {
		t.Errorf("session echo %q, want %q", got, text)
	}
}

// TestAttackModernCrashWithListensAndCalls: the second process answers
// discover, then crashes with listens and calls in flight: each gets
// exactly one answer; its restart says "not modern": stateless requests
// are served (translated) without hanging, sessions never notice. (All of
// that holds.) What fails: the restarted second process, found not
// modern, is never stopped: it runs unused for the Server's lifetime.
func TestAttackModernCrashWithListensAndCalls(t *testing.T) {
	s, marker, _ := atkServer(t, "crash", "modern,legacy", config.ProtocolAuto)
	var outs []*recorder
	for i := range 10 {
		c := atkOpen(t, s)
		if !passthrough(c) {
			t.Fatal("not passed through")
		}
		lo, co := newRecorder(), newRecorder()
		atkHandle(t, c, fmt.Sprintf(`{"jsonrpc":"2.0","id":"L%d","method":"subscriptions/listen","params":{"notifications":{},`+modernMeta+`}}`, i, "{}"), lo)
		atkHandle(t, c, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000},`+modernMeta+`}}`, i, "{}"), co)
		outs = append(outs, lo, co)
	}
	// The 10 client listens count, the gateway's own listen serving them does not.
	testkit.WaitFor(t, "20 pending", func() bool { return s.Pending() == 20 })
	sessionEcho(t, s, "before")
	c := atkOpen(t, s)
	if r := callTool(t, c, "crash", `{}`); !strings.Contains(r, `"error"`) {
		t.Errorf("crash answered %s", r)
	}
	for i, o := range outs {
		o.wait(t, fmt.Sprintf("request %d's answer", i), func(_, replies []string) bool { return len(replies) > 0 })
	}
	time.Sleep(100 * time.Millisecond) // room for a second answer to show; passing does not need it
	for i, o := range outs {
		o.mu.Lock()
		if len(o.replies) != 1 || !strings.Contains(o.replies[0], `"error"`) {
			t.Errorf("request %d: replies %q", i, o.replies)
		}
		o.mu.Unlock()
	}
	sessionEcho(t, s, "during")
	// The restart answers "not modern": requests must still be served.
	deadline := time.Now().Add(20 * time.Second)
	translated := 0
	for time.Now().Before(deadline) && translated < 3 {
		start := time.Now()
		c := atkOpen(t, s)
		if d := time.Since(start); d > 6*time.Second {
			t.Errorf("OpenStateless took %v", d)
		}
		r := callTool(t, c, "echo", `{"message":"hi"}`)
		if toolText(r) != "hi" {
			t.Errorf("stateless echo after the restart: %s (passthrough %v)", r, passthrough(c))
		}
		if !passthrough(c) {
			translated++
		}
		time.Sleep(200 * time.Millisecond) // the client's pace, while the restart happens
	}
	if translated < 3 {
		t.Errorf("the restart that says \"not modern\" did not lead to translation")
	}
	sessionEcho(t, s, "after")
	// The sessions' process and the translation process remain.
	testkit.WaitFor(t, "the restarted second process, found not modern, to be stopped (as on a first verdict)", func() bool {
		return len(testkit.Procs(marker)) <= 2
	})
	procs := testkit.Procs(marker)
	t.Logf("processes after the not-modern restart: %d", len(procs))
	if len(procs) != 2 {
		t.Errorf("%d processes: the restarted second process, found not modern, keeps running unused (want it stopped, as on a first verdict)", len(procs))
	}
}

// TestGoSDKConcurrentListens: stateless clients listening on the Go SDK
// server's one second process, which keys its subscriptions by session (a
// stdio process is one): the Mux serves them from one listen of its own.
// A tool change reaches both listens for it, each tagged with its own id;
// after one ends the other still gets changes; a third client asking for
// prompts (the union grows: the gateway's listen is replaced) gets prompt
// changes and no tool changes, and the first still gets tool changes.
func TestGoSDKConcurrentListens(t *testing.T) {
	s, err := New(everythingServer(t), "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	listen := func(id, filter string) (conn.StatelessConn, *recorder) {
		c := openStateless(t, s, `{}`)
		out := newRecorder()
		atkHandle(t, c, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"subscriptions/listen","params":{"notifications":%s,`+modernMeta+`}}`, id, filter, "{}"), out)
		out.wait(t, "the ack of "+id, func(sends, _ []string) bool { return len(sends) > 0 })
		out.mu.Lock()
		ack := out.sends[0]
		out.mu.Unlock()
		if !strings.Contains(ack, `"notifications/subscriptions/acknowledged"`) || !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":`+id+`}`) {
			t.Errorf("listen %s: first message %s, want its acknowledgement tagged with its id", id, ack)
		}
		return c, out
	}
	// count counts r's notifications of method, each checked for r's tag.
	count := func(r *recorder, id, method string) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, s := range r.sends {
			if strings.Contains(s, `"`+method+`"`) {
				n++
				if !strings.Contains(s, `"io.modelcontextprotocol/subscriptionId":`+id+`}`) {
					t.Errorf("%s: %s not tagged with %s", method, s, id)
				}
			}
		}
		return n
	}
	const tools, prompts = "notifications/tools/list_changed", "notifications/prompts/list_changed"
	waitCount := func(r *recorder, id, method string, n int) {
		t.Helper()
		testkit.WaitFor(t, fmt.Sprintf("%d %s on %s", n, method, id), func() bool { return count(r, id, method) >= n })
	}
	trigger := func(tool string) {
		c := openStateless(t, s, `{}`)
		if r := callTool(t, c, tool, `{}`); strings.Contains(r, `"error"`) {
			t.Fatalf("%s: %s", tool, r)
		}
	}
	_, a := listen(`"A"`, `{"toolsListChanged":true}`)
	cb, b := listen(`"B"`, `{"toolsListChanged":true}`)
	trigger("test_trigger_tool_change")
	waitCount(a, `"A"`, tools, 1)
	waitCount(b, `"B"`, tools, 1)
	cb.Abandon(b)
	trigger("test_trigger_tool_change")
	waitCount(a, `"A"`, tools, 2)

	_, c := listen(`"A"`, `{"promptsListChanged":true}`)
	trigger("test_trigger_prompt_change")
	waitCount(c, `"A"`, prompts, 1)
	trigger("test_trigger_tool_change")
	waitCount(a, `"A"`, tools, 3)
	if n := count(c, `"A"`, tools); n != 0 {
		t.Errorf("the prompts listen got %d tool changes", n)
	}
	if n := count(a, `"A"`, prompts); n != 0 {
		t.Errorf("the tools listen got %d prompt changes", n)
	}
	if n := count(b, `"B"`, tools); n != 1 {
		t.Errorf("the abandoned listen got %d tool changes, want the one before it ended", n)
	}
}
