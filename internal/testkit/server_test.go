package testkit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	Main()
	goleak.VerifyTestMain(m)
}

// failAfter bounds every wait in these tests; passing never depends on it.
const failAfter = 10 * time.Second

// pipeClient drives one fake over its stdin and stdout.
type pipeClient struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	msgs  chan message // every stdout line, decoded; closed at EOF
}

func startFake(t *testing.T, opts FakeOptions) *pipeClient {
	t.Helper()
	name, args, env := Command(opts)
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &pipeClient{t: t, cmd: cmd, stdin: stdin, msgs: make(chan message, 100)}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(c.msgs)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = message{Method: "<not json>", Params: json.RawMessage(fmt.Sprintf("%q", sc.Text()))}
			}
			c.msgs <- m
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for range c.msgs {
		}
		<-readDone
		cmd.Wait()
	})
	return c
}

func (c *pipeClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

func (c *pipeClient) request(id any, method string, params any) {
	c.t.Helper()
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

func (c *pipeClient) next() message {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatal("fake closed stdout")
		}
		return m
	case <-time.After(failAfter):
		c.t.Fatal("no message from fake")
	}
	panic("unreachable")
}

// toolText returns the first text block of a tools/call result.
func toolText(t *testing.T, m message) (string, bool) {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("tool call failed: %v", m.Error)
	}
	var r struct {
		Content []struct{ Text string }
		IsError bool
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("bad tool result %s: %v", m.Result, err)
	}
	return r.Content[0].Text, r.IsError
}

func callTool(name string, args any) map[string]any {
	return map[string]any{"name": name, "arguments": args}
}

func TestInitialize(t *testing.T) {
	for _, tc := range []struct{ ask, want string }{
		{"2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-06-18"},
		{"2025-03-26", "2025-03-26"},
		{"1999-01-01", "2025-11-25"},
	} {
		t.Run(tc.ask, func(t *testing.T) {
			c := startFake(t, FakeOptions{})
			c.request(1, "initialize", map[string]any{
				"protocolVersion": tc.ask, "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "test", "version": "0"},
			})
			m := c.next()
			var r struct {
				ProtocolVersion string
				Capabilities    map[string]json.RawMessage
				ServerInfo      struct{ Name, Version string }
			}
			if err := json.Unmarshal(m.Result, &r); err != nil {
				t.Fatal(err)
			}
			if string(m.ID) != "1" || r.ProtocolVersion != tc.want || r.ServerInfo.Name != FakeServerName {
				t.Fatalf("initialize reply %s %s", m.ID, m.Result)
			}
			for _, k := range []string{"tools", "resources", "logging", "prompts"} {
				if _, ok := r.Capabilities[k]; !ok {
					t.Errorf("capability %s missing", k)
				}
			}
		})
	}
}

func TestListChangedAndGarbageBeforeInit(t *testing.T) {
	c := startFake(t, FakeOptions{GarbageBeforeInit: true, ListChangedBeforeInit: true})
	if m := c.next(); m.Method != "<not json>" {
		t.Fatalf("first line: %+v", m)
	}
	c.request("init", "initialize", map[string]any{"protocolVersion": "2025-06-18"})
	if m := c.next(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("want list_changed first, got %+v", m)
	}
	if m := c.next(); string(m.ID) != `"init"` || m.Result == nil {
		t.Fatalf("want initialize reply, got %+v", m)
	}
}

func TestEchoWithProgress(t *testing.T) {
	c := startFake(t, FakeOptions{})
	c.request(7, "tools/call", map[string]any{
		"name": "echo", "arguments": map[string]any{"message": "hi"},
		"_meta": map[string]any{"progressToken": "tok-1"},
	})
	for i := 1; i <= 3; i++ {
		m := c.next()
		var p struct {
			ProgressToken json.RawMessage
			Progress      int
			Total         int
		}
		json.Unmarshal(m.Params, &p)
		if m.Method != "notifications/progress" || string(p.ProgressToken) != `"tok-1"` || p.Progress != i || p.Total != 3 {
			t.Fatalf("progress %d: %s %s", i, m.Method, m.Params)
		}
	}
	m := c.next()
	if text, _ := toolText(t, m); string(m.ID) != "7" || text != "hi" {
		t.Fatalf("echo reply %s: %q", m.ID, text)
	}
}

func TestSampleRoundTrip(t *testing.T) {
	c := startFake(t, FakeOptions{})
	c.request(1, "tools/call", callTool("sample", map[string]any{"prompt": "2+2?"}))
	req := c.next()
	if req.Method != "sampling/createMessage" || !strings.Contains(string(req.Params), "2+2?") {
		t.Fatalf("want sampling request, got %+v", req)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
		"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "4"},
	}})
	if text, isErr := toolText(t, c.next()); text != "4" || isErr {
		t.Fatalf("sample result %q isError=%v", text, isErr)
	}

	// A client error becomes an error result; the next request gets a new id.
	c.request(2, "tools/call", callTool("sample", map[string]any{"prompt": "again"}))
	req2 := c.next()
	if string(req2.ID) == string(req.ID) {
		t.Fatalf("server reused request id %s", req.ID)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "id": req2.ID, "error": map[string]any{"code": -1, "message": "user declined"}})
	if text, isErr := toolText(t, c.next()); !isErr || !strings.Contains(text, "user declined") {
		t.Fatalf("sample error result %q isError=%v", text, isErr)
	}
}

func TestSlowCancelled(t *testing.T) {
	c := startFake(t, FakeOptions{})
	c.request(5, "tools/call", callTool("slow", map[string]any{"ms": 60_000}))
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 5}})
	// A slow call blocks nothing else.
	c.request(6, "tools/call", callTool("slow", map[string]any{"ms": 1}))
	if m := c.next(); string(m.ID) != "6" {
		t.Fatalf("want reply to 6, got %+v", m)
	}
	c.request(7, "tools/call", callTool("cancelled", nil))
	if text, _ := toolText(t, c.next()); text != "[5]" {
		t.Fatalf("cancelled ids %q", text)
	}
	// After stdin EOF the fake exits; request 5 must never have been answered.
	c.stdin.Close()
	for m := range c.msgs {
		t.Fatalf("unexpected message after cancel: %+v", m)
	}
}

func TestMethodsAndErrors(t *testing.T) {
	c := startFake(t, FakeOptions{})
	c.request(1, "nope/nothing", nil)
	if m := c.next(); m.Error == nil || m.Error.Code != codeMethodNotFound {
		t.Fatalf("unknown method: %+v", m)
	}
	c.request(2, "logging/setLevel", map[string]any{"level": "warning"})
	if m := c.next(); m.Error != nil {
		t.Fatalf("setLevel: %v", m.Error)
	}
	c.request(3, "tools/call", callTool("level", nil))
	if text, _ := toolText(t, c.next()); text != "warning" {
		t.Fatalf("level %q", text)
	}
	c.request(4, "tools/call", callTool("log", map[string]any{"level": "error", "message": "boom"}))
	if m := c.next(); m.Method != "notifications/message" || !strings.Contains(string(m.Params), "boom") {
		t.Fatalf("want log notification, got %+v", m)
	}
	if text, _ := toolText(t, c.next()); text != "logged" {
		t.Fatalf("log result %q", text)
	}
	c.request(5, "resources/read", map[string]any{"uri": "mem://a"})
	if m := c.next(); !strings.Contains(string(m.Result), "content of mem://a") {
		t.Fatalf("read: %+v", m)
	}
	c.stdin.Write([]byte("{not json\n"))
	if m := c.next(); m.Error == nil || m.Error.Code != codeParseError || string(m.ID) != "null" {
		t.Fatalf("parse error: %+v", m)
	}
}

func TestProcsFindsGrandchild(t *testing.T) {
	marker := fmt.Sprintf("procs-%d-%d", os.Getpid(), time.Now().UnixNano())
	c := startFake(t, FakeOptions{SpawnGrandchild: true, Marker: marker})
	c.request(1, "ping", nil) // the grandchild is started before stdin is read
	c.next()
	if got := Procs(marker); len(got) != 2 {
		t.Fatalf("Procs(%q) = %v, want fake and grandchild", marker, got)
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	if left := WaitProcsGone(marker, failAfter); len(left) > 0 {
		t.Fatalf("still alive after SIGKILL to the group: %v", left)
	}
}

// TestModernListen: with Modern, subscriptions/listen is acknowledged
// (tagged with its id), gets the list_changed and touch notifications its
// filter selects, tagged, and ends with a tagged final result when
// cancelled or ended by end_listens; with no listen open the
// notifications go untagged, as before.
func TestModernListen(t *testing.T) {
	c := startFake(t, FakeOptions{Modern: true})
	tag := func(m message) string {
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		b := m.Params
		if m.Method == "" {
			b = m.Result
		}
		json.Unmarshal(b, &p)
		return string(p.Meta[subscriptionKey])
	}
	c.request("L", "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true, "resourceSubscriptions": []string{"mem://dir/"}}})
	if m := c.next(); m.Method != "notifications/subscriptions/acknowledged" || tag(m) != `"L"` || !strings.Contains(string(m.Params), `"resourceSubscriptions":["mem://dir/"]`) {
		t.Fatalf("acknowledgement: %s %s", m.Method, m.Params)
	}
	c.request(1, "tools/call", callTool("list_changed", map[string]any{"kind": "tools"}))
	if m := c.next(); m.Method != "notifications/tools/list_changed" || tag(m) != `"L"` {
		t.Fatalf("tools/list_changed: %s %s", m.Method, m.Params)
	}
	if m := c.next(); string(m.ID) != "1" {
		t.Fatalf("reply to 1: %+v", m)
	}
	c.request(2, "tools/call", callTool("list_changed", map[string]any{"kind": "prompts"})) // not selected
	if m := c.next(); string(m.ID) != "2" {
		t.Fatalf("want only the reply to 2, got %+v", m)
	}
	c.request(3, "tools/call", callTool("touch", map[string]any{"uri": "mem://dir/a"}))
	if m := c.next(); m.Method != "notifications/resources/updated" || tag(m) != `"L"` || !strings.Contains(string(m.Params), `"uri":"mem://dir/a"`) {
		t.Fatalf("resources/updated: %s %s", m.Method, m.Params)
	}
	if m := c.next(); string(m.ID) != "3" {
		t.Fatalf("reply to 3: %+v", m)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "L"}})
	if m := c.next(); string(m.ID) != `"L"` || tag(m) != `"L"` || !strings.Contains(string(m.Result), `"resultType":"complete"`) {
		t.Fatalf("final result of the cancelled listen: %+v", m)
	}
	c.request(4, "tools/call", callTool("list_changed", nil)) // no listen: untagged
	if m := c.next(); m.Method != "notifications/tools/list_changed" || tag(m) != "" {
		t.Fatalf("untagged tools/list_changed: %s %s", m.Method, m.Params)
	}
	c.next()

	c.request(5, "subscriptions/listen", map[string]any{"notifications": map[string]any{"promptsListChanged": true}})
	if m := c.next(); m.Method != "notifications/subscriptions/acknowledged" || tag(m) != "5" {
		t.Fatalf("acknowledgement: %s %s", m.Method, m.Params)
	}
	c.request(6, "tools/call", callTool("end_listens", nil))
	if m := c.next(); string(m.ID) != "5" || tag(m) != "5" {
		t.Fatalf("final result of the ended listen: %+v", m)
	}
	if text, _ := toolText(t, c.next()); text != "1" {
		t.Fatalf("end_listens: %q", text)
	}
}

// TestCallsAndStarted: slow with started sends progress 0 first; the tool
// calls lists it in flight, then, once notifications/cancelled cancelled
// it, as cancelled.
func TestCallsAndStarted(t *testing.T) {
	c := startFake(t, FakeOptions{})
	c.request(1, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"ms": 60_000, "started": true, "message": "m1"}, "_meta": map[string]any{"progressToken": "p"}})
	if m := c.next(); m.Method != "notifications/progress" || !strings.Contains(string(m.Params), `"progress":0`) {
		t.Fatalf("want progress 0, got %s %s", m.Method, m.Params)
	}
	calls := func(id int) string {
		c.request(id, "tools/call", callTool("calls", nil))
		text, _ := toolText(t, c.next())
		return text
	}
	if got := calls(2); !strings.Contains(got, `"inflight":[{"method":"tools/call","params":{`) || !strings.Contains(got, `"message":"m1"`) || !strings.Contains(got, `"cancelled":[]`) {
		t.Fatalf("calls in flight: %s", got)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 1}})
	if got := calls(3); !strings.Contains(got, `"inflight":[]`) || !strings.Contains(got, `"cancelled":[{"method":"tools/call"`) || !strings.Contains(got, `"message":"m1"`) {
		t.Fatalf("calls after the cancellation: %s", got)
	}
}
