package bridge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// modernMeta is the _meta every request of a 2026-07-28 client carries.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// modernRequest is a 2026-07-28 request line; params holds the members
// other than _meta ("" for none).
func modernRequest(id, method, params string) string {
	if params != "" {
		params += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":{%s%s}}`, id, method, params, modernMeta) + "\n"
}

// modernUpstream is a stateless (2026-07-28) server: server/discover, and
// tools/call of "json" (a JSON reply), "sse" (a progress notification,
// then the reply, on an SSE stream) and "slow" (never answered: it reports
// on entered, waits for the client to go, reports on left); a
// subscriptions/listen is acknowledged and then held open like "slow".
// It records the methods and the ids of the POSTs it got, and refuses a
// POST whose Mcp-Method header does not match its body.
type modernUpstream struct {
	entered, left chan string // the id of a held request

	mu    sync.Mutex
	posts []string // method id, per POST
}

func newModernUpstream(t *testing.T) (*modernUpstream, string) {
	u := &modernUpstream{entered: make(chan string, 8), left: make(chan string, 8)}
	ts := httptest.NewServer(u)
	t.Cleanup(ts.Close)
	return u, ts.URL + "/mcp"
}

func (u *modernUpstream) count(post string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, p := range u.posts {
		if p == post {
			n++
		}
	}
	return n
}

func (u *modernUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Parse(body)
	if err != nil || msg.Kind != jsonrpc.KindRequest {
		http.Error(w, "bad message", http.StatusBadRequest)
		return
	}
	id := msg.Bytes(msg.ID)
	u.mu.Lock()
	u.posts = append(u.posts, msg.MethodName()+" "+string(id))
	u.mu.Unlock()
	reply := func(status int, m []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(m)
	}
	if r.Header.Get("Mcp-Method") != msg.MethodName() || r.Header.Get("MCP-Protocol-Version") != "2026-07-28" {
		reply(http.StatusBadRequest, jsonrpc.ErrorResponse(id, -32020, "header mismatch"))
		return
	}
	var p struct {
		Name string `json:"name"`
	}
	var params struct {
		Params json.RawMessage `json:"params"`
	}
	json.Unmarshal(body, &params)
	json.Unmarshal(params.Params, &p)
	hold := func() {
		u.entered <- string(id)
		<-r.Context().Done()
		u.left <- string(id)
	}
	switch {
	case msg.MethodIs("server/discover"):
		reply(http.StatusOK, jsonrpc.Response(id, []byte(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private"}`)))
	case msg.MethodIs("tools/call") && p.Name == "json":
		reply(http.StatusOK, jsonrpc.Response(id, []byte(`{"resultType":"complete","content":[{"type":"text","text":"from json"}]}`)))
	case msg.MethodIs("tools/call") && p.Name == "sse":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", jsonrpc.Notification("notifications/progress", []byte(`{"progressToken":"tok","progress":1}`)))
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", jsonrpc.Response(id, []byte(`{"resultType":"complete","content":[{"type":"text","text":"from sse"}]}`)))
	case msg.MethodIs("tools/call") && p.Name == "slow":
		hold()
	case msg.MethodIs("subscriptions/listen"):
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", jsonrpc.Notification("notifications/subscriptions/acknowledged",
			fmt.Appendf(nil, `{"_meta":{"io.modelcontextprotocol/subscriptionId":%s},"notifications":{"toolsListChanged":true}}`, id)))
		w.(http.Flusher).Flush()
		hold()
	default:
		reply(http.StatusNotFound, jsonrpc.ErrorResponse(id, -32601, "method not found"))
	}
}

// answers counts the responses to id (raw JSON) among lines.
func answers(lines []string, id string) []string {
	var got []string
	for _, l := range lines {
		m, err := jsonrpc.Parse([]byte(l))
		if err == nil && m.Kind == jsonrpc.KindResponse && string(m.Bytes(m.ID)) == id {
			got = append(got, l)
		}
	}
	return got
}

// TestStatelessModernRemote: a 2026-07-28 client's requests reach a
// 2026-07-28 remote as stateless POSTs, concurrently: a slow call in
// flight does not hold back the others; a reply comes as JSON or after a
// notification on an SSE stream; notifications/cancelled aborts a call and
// a subscriptions/listen; the remote is probed once; every other request
// is answered exactly once, with the client's id; and stdin EOF, with a
// DrainTimeout far longer than the test's wait, ends Run at once.
func TestStatelessModernRemote(t *testing.T) {
	u, url := newModernUpstream(t)
	out := newSink()
	in, done := runBridgeWith(t, t.Context(), Options{Remote: remote.Config{URL: url}, Stdout: out, DrainTimeout: time.Hour})

	io.WriteString(in, modernRequest(`"d"`, "server/discover", ""))
	io.WriteString(in, modernRequest(`"slow"`, "tools/call", `"name":"slow","arguments":{}`))
	if got := testkit.Receive(t, u.entered, "the slow call"); got != `"slow"` {
		t.Fatalf("held %s", got)
	}
	io.WriteString(in, modernRequest(`1`, "tools/call", `"name":"json","arguments":{}`))
	io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sse","arguments":{},"_meta":{"progressToken":"tok","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`+"\n")
	io.WriteString(in, modernRequest(`"L"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`))
	out.wait(t, `"id":"d"`, `"supportedVersions":["2026-07-28"]`)
	out.wait(t, `"id":1,`, "from json")
	out.wait(t, `"id":2,`, "from sse")
	out.wait(t, "notifications/subscriptions/acknowledged", `subscriptionId":"L"`)
	if got := testkit.Receive(t, u.entered, "the listen"); got != `"L"` {
		t.Fatalf("held %s", got)
	}

	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`+"\n")
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`+"\n")
	left := map[string]bool{testkit.Receive(t, u.left, "a cancelled POST to end"): true, testkit.Receive(t, u.left, "a cancelled POST to end"): true}
	if !left[`"slow"`] || !left[`"L"`] {
		t.Errorf("ended POSTs %v", left)
	}
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}

	lines := out.lines()
	for _, id := range []string{`"d"`, `1`, `2`} {
		if got := answers(lines, id); len(got) != 1 {
			t.Errorf("%d replies to %s:\n%s", len(got), id, strings.Join(lines, "\n"))
		}
	}
	for _, id := range []string{`"slow"`, `"L"`} {
		if got := answers(lines, id); len(got) != 0 {
			t.Errorf("the cancelled %s was answered: %s", id, got)
		}
	}
	progress, reply := -1, -1
	for i, l := range lines {
		switch {
		case strings.Contains(l, "notifications/progress"):
			progress = i
		case strings.Contains(l, `"id":2,`):
			reply = i
		}
	}
	if progress < 0 || progress > reply {
		t.Errorf("the progress notification (line %d) did not come before its reply (line %d)", progress, reply)
	}
	if n := u.count(`server/discover "mcpgate-discover"`); n != 1 {
		t.Errorf("the remote was probed %d times, want 1", n)
	}
	if n := u.count(`server/discover "d"`); n != 1 {
		t.Errorf("the client's server/discover reached the remote %d times, want 1", n)
	}
}

// TestStatelessDrain: at stdin EOF, a stateless request still in flight
// gets an error reply once DrainTimeout has passed, and a listen is not
// waited for but answered with an error too.
func TestStatelessDrain(t *testing.T) {
	u, url := newModernUpstream(t)
	out := newSink()
	in, done := runBridgeWith(t, t.Context(), Options{Remote: remote.Config{URL: url}, Stdout: out, DrainTimeout: 200 * time.Millisecond})
	io.WriteString(in, modernRequest(`7`, "tools/call", `"name":"slow","arguments":{}`))
	io.WriteString(in, modernRequest(`8`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`))
	testkit.Receive(t, u.entered, "a held request")
	testkit.Receive(t, u.entered, "a held request")
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines := out.lines()
	for _, id := range []string{"7", "8"} {
		got := answers(lines, id)
		if len(got) != 1 || !strings.Contains(got[0], "-32000") || !strings.Contains(got[0], "stdin closed and no reply came within 200ms") {
			t.Errorf("replies to %s: %q", id, got)
		}
	}
	testkit.Receive(t, u.left, "a cut POST to end")
	testkit.Receive(t, u.left, "a cut POST to end")
}

// TestStatelessListenNotDrained: with only a listen open at stdin EOF, Run
// ends without waiting out DrainTimeout, and the listen gets an error.
func TestStatelessListenNotDrained(t *testing.T) {
	u, url := newModernUpstream(t)
	out := newSink()
	in, done := runBridgeWith(t, t.Context(), Options{Remote: remote.Config{URL: url}, Stdout: out, DrainTimeout: time.Hour})
	io.WriteString(in, modernRequest(`"L"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`))
	testkit.Receive(t, u.entered, "the listen")
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := answers(out.lines(), `"L"`); len(got) != 1 || !strings.Contains(got[0], "the bridge is stopping") {
		t.Errorf("replies to the listen: %q", got)
	}
}

// TestStatelessSessionRemote: in front of a session-era remote, a
// 2026-07-28 request gets -32022 naming the session versions and echoing
// the one requested, the remote is probed once, and the client's fallback
// to initialize works as before.
func TestStatelessSessionRemote(t *testing.T) {
	u := &upstream{}
	ts := httptest.NewServer(u)
	defer ts.Close()
	in, out, done := runBridge(t, t.Context(), remote.Config{URL: ts.URL + "/mcp"})

	io.WriteString(in, modernRequest(`"d"`, "server/discover", ""))
	got := out.wait(t, `"id":"d"`)
	var reply struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
				Requested string   `json:"requested"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(got), &reply); err != nil || reply.Error.Code != -32022 ||
		reply.Error.Data.Requested != "2026-07-28" || len(reply.Error.Data.Supported) == 0 || reply.Error.Data.Supported[0] != "2025-11-25" {
		t.Fatalf("discover answered %s", got)
	}
	io.WriteString(in, modernRequest(`"again"`, "tools/list", ""))
	if got := out.wait(t, `"id":"again"`); !strings.Contains(got, "-32022") {
		t.Errorf("second modern request answered %s", got)
	}
	io.WriteString(in, initLine+`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	out.wait(t, `"id":1,`, "protocolVersion")
	out.wait(t, `"id":2,`, `"method":"tools/list"`)
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, m := range u.methods {
		if m == "server/discover" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the remote got %d server/discover, want 1 (the probe); methods %q", n, u.methods)
	}
}

// TestStatelessUnreachable: with the remote unreachable, a 2026-07-28
// request gets an error naming the cause (the probe said nothing, so it is
// not -32022).
func TestStatelessUnreachable(t *testing.T) {
	addr := testkit.FreeAddr(t)
	in, out, done := runBridge(t, t.Context(), remote.Config{URL: "http://" + addr + "/mcp"})
	io.WriteString(in, modernRequest(`1`, "server/discover", ""))
	io.WriteString(in, modernRequest(`2`, "tools/list", ""))
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines := out.lines()
	for _, id := range []string{"1", "2"} {
		got := answers(lines, id)
		if len(got) != 1 || !strings.Contains(got[0], "-32000") || !strings.Contains(got[0], "connection refused") {
			t.Errorf("replies to %s: %q", id, got)
		}
	}
}

// TestStatelessEverythingServer: discover, tools/list and tools/call go
// through the bridge to the Go SDK's everything server in its stateless
// HTTP mode (skipped when .cache/bin/everything-server is absent).
func TestStatelessEverythingServer(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "bin", "everything-server")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no everything-server: %v", err)
	}
	addr := testkit.FreeAddr(t)
	cmd := exec.Command(bin, "-http", addr)
	cmd.Stderr = testkit.LogWriter{T: t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	testkit.WaitListening(t, "everything-server", addr, nil)

	in, out, done := runBridge(t, t.Context(), remote.Config{URL: "http://" + addr})
	io.WriteString(in, modernRequest(`1`, "server/discover", ""))
	out.wait(t, `"id":1,`, `"supportedVersions"`, "2026-07-28")
	io.WriteString(in, modernRequest(`2`, "tools/list", ""))
	out.wait(t, `"id":2,`, "test_simple_text")
	io.WriteString(in, modernRequest(`3`, "tools/call", `"name":"test_simple_text","arguments":{}`))
	got := out.wait(t, `"id":3,`)
	if !strings.Contains(got, `"content"`) || strings.Contains(got, `"error"`) {
		t.Errorf("tools/call answered %s", got)
	}
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
