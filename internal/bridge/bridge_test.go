package bridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitTimeout = 20 * time.Second

// sink is Stdout: it collects lines and wakes waiters.
type sink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newSink() *sink { return &sink{changed: make(chan struct{})} }

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return len(p), nil
}

func (s *sink) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := s.buf.String()
	if !strings.HasSuffix(text, "\n") && text != "" {
		panic("partial line written: " + text)
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

// wait waits for a line containing all of subs.
func (s *sink) wait(t *testing.T, subs ...string) string {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		for _, l := range s.lines() {
			ok := true
			for _, sub := range subs {
				ok = ok && strings.Contains(l, sub)
			}
			if ok {
				return l
			}
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no line with %q on stdout:\n%s", subs, strings.Join(s.lines(), "\n"))
		}
	}
}

// upstream is a minimal Streamable HTTP server: sessions, JSON replies
// echoing the method, 202 for the rest, 405 for GET, and a record of
// DELETEs.
type upstream struct {
	mu      sync.Mutex
	deletes int
	methods []string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		u.mu.Lock()
		u.deletes++
		u.mu.Unlock()
		return
	case http.MethodGet:
		http.Error(w, "no stream", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Parse(body)
	if err != nil {
		http.Error(w, "bad message", http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.methods = append(u.methods, msg.MethodName())
	u.mu.Unlock()
	if msg.Kind != jsonrpc.KindRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if msg.MethodIs("initialize") {
		w.Header().Set("Mcp-Session-Id", "s1")
		w.Write(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"u","version":"1"}}`)))
		return
	}
	w.Write(jsonrpc.Response(msg.Bytes(msg.ID), fmt.Appendf(nil, `{"method":%q}`, msg.MethodName())))
}

func testLogger(t *testing.T) *slog.Logger { return testkit.Logger(t, slog.LevelDebug) }

// runBridge runs Run in a goroutine with a pipe as stdin; the returned
// channel yields Run's result.
func runBridge(t *testing.T, ctx context.Context, cfg remote.Config) (*io.PipeWriter, *sink, <-chan error) {
	t.Helper()
	out := newSink()
	in, done := runBridgeWith(t, ctx, Options{Remote: cfg, Stdout: out})
	return in, out, done
}

// runBridgeWith is runBridge with more options; Stdin is a pipe.
func runBridgeWith(t *testing.T, ctx context.Context, opts Options) (*io.PipeWriter, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	opts.Stdin, opts.Logger = inR, testLogger(t)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, opts)
	}()
	t.Cleanup(func() {
		inW.Close()
		inR.Close()
	})
	return inW, done
}

func TestBridgeRoundTrip(t *testing.T) {
	u := &upstream{}
	ts := httptest.NewServer(u)
	defer ts.Close()
	in, out, done := runBridge(t, t.Context(), remote.Config{URL: ts.URL + "/mcp"})

	io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`+"\n")
	out.wait(t, `"id":1`, "protocolVersion")
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\r\n")
	io.WriteString(in, "\n   \n")
	io.WriteString(in, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`+"\n")
	io.WriteString(in, "{not json\n")
	io.WriteString(in, `{"id":5,"method":7}`+"\n")
	io.WriteString(in, `[{"jsonrpc":"2.0","id":8,"method":"a"},{"jsonrpc":"2.0","id":9,"method":"b"}]`+"\n")
	out.wait(t, `"id":"list"`, `"method":"tools/list"`)
	if got := out.wait(t, `"id":null`); !strings.Contains(got, "-32700") {
		t.Errorf("malformed line answered %s", got)
	}
	if got := out.wait(t, `"id":5`); !strings.Contains(got, "-32600") {
		t.Errorf("invalid message answered %s", got)
	}
	out.wait(t, `"id":8`, `"method":"a"`)
	out.wait(t, `"id":9`, `"method":"b"`)
	// A last request without a newline, then EOF at once: Run still
	// answers it before it returns.
	io.WriteString(in, `{"jsonrpc":"2.0","id":10,"method":"last"}`)
	in.Close()
	out.wait(t, `"id":10`, `"method":"last"`)
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.deletes != 1 {
		t.Errorf("%d DELETEs after stdin EOF, want 1", u.deletes)
	}
	for _, l := range out.lines() {
		if _, err := jsonrpc.Parse([]byte(l)); err != nil {
			t.Errorf("stdout line is not JSON-RPC: %q", l)
		}
	}
}

// TestBridgeCancel: Run returns when ctx ends, stdin still open.
func TestBridgeCancel(t *testing.T) {
	ts := httptest.NewServer(&upstream{})
	defer ts.Close()
	ctx, cancel := context.WithCancel(t.Context())
	in, out, done := runBridge(t, ctx, remote.Config{URL: ts.URL + "/mcp"})
	io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n")
	out.wait(t, `"id":1`)
	cancel()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestBridgeUnreachable: with the server unreachable, every request gets
// exactly one error line naming the cause, whether it came before
// initialize, was the initialize, or came after it, and stdin EOF ends Run
// cleanly. Before, everything after a failed initialize went unanswered and
// Run never returned.
func TestBridgeUnreachable(t *testing.T) {
	addr := testkit.FreeAddr(t)
	for _, transport := range []string{remote.TransportAuto, remote.TransportHTTP, remote.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			in, out, done := runBridge(t, t.Context(), remote.Config{URL: "http://" + addr + "/mcp", Transport: transport})
			io.WriteString(in, `{"jsonrpc":"2.0","id":"early","method":"tools/list"}`+"\n")
			io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n")
			out.wait(t, `"id":1`)
			io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
			out.wait(t, `"id":2`)
			io.WriteString(in, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
			in.Close()
			if err := testkit.Receive(t, done, "Run to return"); err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := "remote http://" + addr + "/mcp unreachable: connection refused"
			lines := out.lines()
			for _, id := range []string{`"early"`, "1", "2", "3"} {
				n := 0
				for _, l := range lines {
					if strings.Contains(l, `"id":`+id+`,`) {
						n++
						if !strings.Contains(l, "-32000") || !strings.Contains(l, want) {
							t.Errorf("reply to %s: %s", id, l)
						}
					}
				}
				if n != 1 {
					t.Errorf("%d replies to %s; stdout:\n%s", n, id, strings.Join(lines, "\n"))
				}
			}
		})
	}
}

func TestBridgeInvalidConfig(t *testing.T) {
	err := Run(t.Context(), Options{Remote: remote.Config{URL: "ftp://x"}, Stdin: strings.NewReader(""), Stdout: io.Discard})
	if err == nil {
		t.Fatal("Run accepted an ftp URL")
	}
}

func TestReadLine(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader("ab\r\n"+strings.Repeat("x", 40)+"\nok\nlast"), 16)
	for _, want := range []struct {
		line    string
		tooLong bool
		eof     bool
	}{{"ab", false, false}, {"", true, false}, {"ok", false, false}, {"last", false, true}} {
		line, tooLong, err := readLine(br, 20)
		if string(line) != want.line || tooLong != want.tooLong || (err == io.EOF) != want.eof {
			t.Errorf("readLine = %q, %v, %v; want %+v", line, tooLong, err, want)
		}
	}
}

func FuzzReadLine(f *testing.F) {
	f.Add([]byte("a\nbb\r\n\nccc"), 2)
	f.Add([]byte(strings.Repeat("z", 100)+"\n"), 10)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		limit = 1 + abs(limit)%64
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		for range len(data) + 2 {
			line, tooLong, err := readLine(br, limit)
			if len(line) > limit || tooLong && line != nil || bytes.ContainsAny(line, "\n") {
				t.Fatalf("readLine = %q, %v", line, tooLong)
			}
			if err != nil {
				return
			}
		}
		t.Fatal("readLine never reached the end")
	})
}

func FuzzIDOf(f *testing.F) {
	for _, s := range []string{`{"id":5}`, `{"id":"x"}`, `{"id":null}`, `{"id":{}}`, `[1]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		id := idOf(line)
		if id == nil {
			return
		}
		// The id goes into an error reply: the reply must be valid JSON-RPC.
		if _, err := jsonrpc.Parse(jsonrpc.ErrorResponse(id, -32600, "x")); err != nil {
			t.Fatalf("idOf(%q) = %q: reply invalid: %v", line, id, err)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// hangingUpstream is upstream, except that the method "slow" is never
// answered: its handler says so on entered, waits until the client goes
// away, then says so on left.
func hangingUpstream(t *testing.T) (u *upstream, url string, entered, left <-chan struct{}) {
	u = &upstream{}
	in, out := make(chan struct{}, 4), make(chan struct{}, 4)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if msg, err := jsonrpc.Parse(body); err == nil && msg.MethodIs("slow") {
				in <- struct{}{}
				<-r.Context().Done()
				out <- struct{}{}
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		u.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return u, ts.URL + "/mcp", in, out
}

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}` + "\n" +
	`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"

// TestBridgeDrainTimeout: after stdin ends, a request the server never
// answers gets an error reply once DrainTimeout has passed, and Run ends
// (DELETEing the session). Before, Run waited for the reply forever.
func TestBridgeDrainTimeout(t *testing.T) {
	u, url, entered, left := hangingUpstream(t)
	out := newSink()
	in, done := runBridgeWith(t, t.Context(), Options{Remote: remote.Config{URL: url}, Stdout: out, DrainTimeout: 200 * time.Millisecond})
	io.WriteString(in, initLine+`{"jsonrpc":"2.0","id":3,"method":"slow"}`+"\n")
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatal("the slow request never reached the server")
	}
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := out.wait(t, `"id":3`); !strings.Contains(got, "stdin closed and no reply came within 200ms") {
		t.Errorf("reply %s", got)
	}
	select {
	case <-left:
	case <-time.After(waitTimeout):
		t.Error("the slow exchange was never aborted")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.deletes != 1 {
		t.Errorf("%d DELETEs, want 1", u.deletes)
	}
}

// TestBridgeClientCancelled: a request the client cancelled is not waited
// for when stdin ends (with a DrainTimeout far longer than the test's
// wait), and the remote exchange is aborted at once.
func TestBridgeClientCancelled(t *testing.T) {
	_, url, entered, left := hangingUpstream(t)
	out := newSink()
	in, done := runBridgeWith(t, t.Context(), Options{Remote: remote.Config{URL: url}, Stdout: out, DrainTimeout: time.Hour})
	io.WriteString(in, initLine+`{"jsonrpc":"2.0","id":"s","method":"slow"}`+"\n")
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatal("the slow request never reached the server")
	}
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s"}}`+"\n")
	select {
	case <-left:
	case <-time.After(waitTimeout):
		t.Fatal("the cancelled exchange was not aborted")
	}
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, l := range out.lines() {
		if strings.Contains(l, `"id":"s"`) {
			t.Errorf("the cancelled request was answered: %s", l)
		}
	}
}

// blockedWriter is a Stdout nobody reads: Write blocks until release.
type blockedWriter struct{ release chan struct{} }

func (w blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	return 0, io.ErrClosedPipe
}

// TestBridgeStdoutNotRead: Run ends in bounded time after stdin EOF even
// when Stdout is never read. Before, it waited for the writer forever.
func TestBridgeStdoutNotRead(t *testing.T) {
	_, url, _, _ := hangingUpstream(t)
	w := blockedWriter{release: make(chan struct{})}
	t.Cleanup(func() { close(w.release) }) // lets the writer go, for goleak
	in, done := runBridgeWith(t, t.Context(), Options{Remote: remote.Config{URL: url, ConnectTimeout: 500 * time.Millisecond}, Stdout: w, DrainTimeout: 100 * time.Millisecond})
	io.WriteString(in, initLine+`{"jsonrpc":"2.0","id":3,"method":"slow"}`+"\n")
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
