package front

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

const holdReq = `{"jsonrpc":"2.0","id":7,"method":"hold"}`

// A request in flight when its session is deleted gets a JSON-RPC error,
// as a JSON body or an SSE event (it used to get a 202 with no body: the
// streams were closed before the connection could answer). With a
// connection that answers nothing, the handler answers itself, naming why.
func TestDeleteAnswersRequestInFlight(t *testing.T) {
	for _, tc := range []struct {
		version string
		silent  bool
		want    string
	}{
		{"2025-06-18", false, "conn closed"},
		{"2025-11-25", false, "conn closed"},
		{"2025-06-18", true, "the client deleted the session"},
		{"2025-11-25", true, "the client deleted the session"},
	} {
		t.Run(tc.version+map[bool]string{true: "/silent"}[tc.silent], func(t *testing.T) {
			b := newFakeBackend()
			b.version, b.silentClose = tc.version, tc.silent
			_, srv := testServer(t, b, Config{})
			sid := initSession(t, srv)
			conn := testkit.Receive(t, b.conns, "open")
			got := postAsync(t, srv, sid, tc.version, holdReq)
			testkit.Receive(t, conn.held, "the request to reach the server")
			if resp, body := do(t, srv, http.MethodDelete, mcpPath, "", "Mcp-Session-Id", sid); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
			}
			reply := testkit.Receive(t, got, "the reply")
			if !strings.HasPrefix(reply, "200") || !strings.Contains(reply, `"id":7`) || !strings.Contains(reply, `"error"`) || !strings.Contains(reply, tc.want) {
				t.Fatalf("reply to the request in flight:\n%s", reply)
			}
		})
	}
}

// Shutdown answers the requests in flight of every session, legacy ones on
// their SSE stream, and waits for the handlers writing them.
func TestCloseAnswersEverySession(t *testing.T) {
	b := newFakeBackend()
	h, srv := testServer(t, b, Config{})
	var replies []<-chan string
	for range 5 {
		sid := initSession(t, srv)
		conn := testkit.Receive(t, b.conns, "open")
		replies = append(replies, postAsync(t, srv, sid, "2025-06-18", holdReq))
		testkit.Receive(t, conn.held, "the request to reach the server")
	}

	// A legacy session with a request in flight.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/servers/x/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	endpoint := ""
	for endpoint == "" && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			endpoint = d
		}
	}
	legacy := testkit.Receive(t, b.conns, "legacy open")
	if r, body := do(t, srv, http.MethodPost, endpoint, holdReq, "Content-Type", "application/json"); r.StatusCode != http.StatusAccepted {
		t.Fatalf("legacy POST: %d %s", r.StatusCode, body)
	}
	testkit.Receive(t, legacy.held, "the legacy request to reach the server")

	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	for i, c := range replies {
		if reply := testkit.Receive(t, c, "a reply"); !strings.Contains(reply, `"id":7`) || !strings.Contains(reply, "conn closed") {
			t.Fatalf("session %d: %s", i, reply)
		}
	}
	var stream strings.Builder
	for sc.Scan() {
		stream.WriteString(sc.Text() + "\n")
	}
	if !strings.Contains(stream.String(), `"id":7`) || !strings.Contains(stream.String(), "conn closed") {
		t.Fatalf("legacy stream ended without the reply:\n%s", stream.String())
	}
	testkit.Receive(t, closed, "Close")
	if h.Sessions() != 0 {
		t.Fatalf("%d sessions left", h.Sessions())
	}
}

// One session whose connection is slow to close does not hold up the
// sweeper (it used to close every expired session inline).
func TestSweepDoesNotWaitForSlowClose(t *testing.T) {
	b := newFakeBackend()
	b.closeBlock = make(chan struct{})
	h, srv := testServer(t, b, Config{IdleTimeout: time.Minute})
	initSession(t, srv)
	initSession(t, srv)
	swept := make(chan struct{})
	go func() { h.Sweep(time.Now().Add(time.Hour)); close(swept) }()
	testkit.Receive(t, swept, "Sweep to return while both connections block in Close")
	if h.Sessions() != 0 {
		t.Fatalf("%d sessions not expired", h.Sessions())
	}
	close(b.closeBlock)
	if !h.closers.wait(10 * time.Second) {
		t.Fatal("the closes never finished")
	}
}

// A final reply is never pushed out of a stream's buffer by a flood of
// progress notifications.
func TestProgressFloodKeepsFinalReply(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{ReplayEvents: 8})
	sid := initSession(t, srv)
	reply := testkit.Receive(t, postAsync(t, srv, sid, "2025-06-18", `{"jsonrpc":"2.0","id":9,"method":"flood"}`), "the reply")
	if !strings.Contains(reply, `"flooded":true`) || strings.Count(reply, "notifications/progress") > 8 {
		t.Fatalf("reply:\n%.2000s", reply)
	}
}

// A 2025-03-26 batch with more requests than a stream keeps events is
// answered whole (it used to hang: respond ignored ErrLost).
func TestBatchLargerThanReplayIsAnswered(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-03-26"
	_, srv := testServer(t, b, Config{ReplayEvents: 8})
	sid := initSession(t, srv)
	var batch strings.Builder
	batch.WriteString("[")
	for i := range 600 {
		if i > 0 {
			batch.WriteString(",")
		}
		batch.WriteString(`{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"echo"}`)
	}
	batch.WriteString("]")
	reply := testkit.Receive(t, postAsync(t, srv, sid, "2025-03-26", batch.String()), "the batch reply")
	if !strings.HasPrefix(reply, "200") || strings.Count(reply, `"result"`) != 600 || !strings.Contains(reply, `"id":599`) {
		t.Fatalf("batch reply: %.300s", reply)
	}
}

// A standalone stream that overflowed before its first GET opens at the
// oldest event kept (it used to be lost for good).
func TestStandaloneStreamOpensAfterOverflow(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{ReplayEvents: 4})
	sid := initSession(t, srv)
	conn := testkit.Receive(t, b.conns, "open")
	for i := range 20 {
		conn.general.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"n":` + itoa(i) + `}}`))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+mcpPath, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var got []string
	for len(got) < 4 && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			got = append(got, d)
		}
	}
	if len(got) != 4 || !strings.Contains(got[0], `"n":16`) || !strings.Contains(got[3], `"n":19`) {
		t.Fatalf("GET stream events: %q", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Ending a session tells its requests in flight why, through the Conn's
// CloseWith (Close still follows it, once): a DELETE, an idle expiry and
// a shutdown each name themselves.
func TestEndTellsRequestsWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *Handler, srv *httptest.Server, sid string)
		want string
	}{
		{"delete", func(_ *Handler, srv *httptest.Server, sid string) {
			do(t, srv, http.MethodDelete, mcpPath, "", "Mcp-Session-Id", sid)
		}, "mcpgate: the client deleted the session"},
		{"expiry", func(h *Handler, _ *httptest.Server, _ string) { h.Sweep(time.Now().Add(time.Hour)) }, "mcpgate: the session expired"},
		{"shutdown", func(h *Handler, _ *httptest.Server, _ string) { h.Close() }, "mcpgate: the gateway is shutting down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBackend()
			b.closeWith = true
			h, srv := testServer(t, b, Config{})
			sid := initSession(t, srv)
			conn := testkit.Receive(t, b.conns, "open")
			// An idle session has no request in flight: only the reason
			// given to the Conn is checked for expiry.
			idle := tc.name == "expiry"
			var got <-chan string
			if !idle {
				got = postAsync(t, srv, sid, "2025-06-18", holdReq)
				testkit.Receive(t, conn.held, "the request to reach the server")
			}
			tc.end(h, srv, sid)
			if !h.closers.wait(10 * time.Second) {
				t.Fatal("the session never ended")
			}
			if n := b.closes.Load(); n != 1 {
				t.Fatalf("Close called %d times after CloseWith, want 1", n)
			}
			conn.mu.Lock()
			reason := conn.reason
			conn.mu.Unlock()
			if "mcpgate: "+reason != tc.want {
				t.Fatalf("CloseWith(%q), want %q", reason, tc.want)
			}
			if idle {
				return
			}
			body := testkit.Receive(t, got, "the answer")
			if !strings.Contains(body, `"message":"`+tc.want+`"`) {
				t.Fatalf("answer %q, want the error %q", body, tc.want)
			}
		})
	}
}

// A session id is the session's only credential: logs carry its first
// logIDLen characters, never the whole id. A DELETE is routine (DEBUG).
func TestLogsShortSessionID(t *testing.T) {
	var logs testkit.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Logger: log})
	sid := initSession(t, srv)
	if len(sid) <= logIDLen {
		t.Fatalf("session id %q too short for the test", sid)
	}
	do(t, srv, http.MethodDelete, mcpPath, "", "Mcp-Session-Id", sid)
	out := logs.String()
	if strings.Contains(out, sid) {
		t.Fatalf("full session id logged:\n%s", out)
	}
	want := "level=DEBUG msg=\"session deleted\" session=" + sid[:logIDLen] + " "
	if !strings.Contains(out, want) {
		t.Fatalf("no %q in:\n%s", want, out)
	}
	if !strings.Contains(out, "level=INFO msg=\"session opened\" session="+sid[:logIDLen]+" ") {
		t.Fatalf("initialize not logged with the short id:\n%s", out)
	}
	if !strings.Contains(out, "level=INFO msg=\"session closed\" session="+sid[:logIDLen]+" ") {
		t.Fatalf("end not logged with the short id:\n%s", out)
	}
}

// countingShared is a limits.Shared that admits every session and counts
// those given back.
type countingShared struct {
	taken, given atomic.Int64
}

func (c *countingShared) Admit(context.Context, limits.SharedRequest) (limits.SharedVerdict, error) {
	return limits.SharedVerdict{Refused: -1}, nil
}
func (c *countingShared) AdmitSession(_ context.Context, _ string, _, ended int) (bool, error) {
	c.given.Add(int64(ended))
	c.taken.Add(1)
	return true, nil
}
func (c *countingShared) Release(_ string, kind limits.Counted, n int) {
	if kind == limits.Session {
		c.given.Add(int64(n))
	}
}
func (c *countingShared) Live() int { return 1 }

// The sessions a replica ends as it shuts down are given back to the
// limits the replicas share: a rolling restart must not leave them
// counted against their principal (until the count's TTL, a day).
func TestCloseGivesBackSharedSessions(t *testing.T) {
	shared := &countingShared{}
	h, srv := testServer(t, newFakeBackend(), Config{Limits: &limits.Config{MaxSessions: 5, Shared: shared}})
	for range 3 {
		initSession(t, srv)
	}
	if shared.taken.Load() != 3 || shared.given.Load() != 0 {
		t.Fatalf("taken %d, given back %d; want 3, 0", shared.taken.Load(), shared.given.Load())
	}
	h.Close()
	if got := shared.given.Load(); got != 3 {
		t.Errorf("%d of the 3 sessions ended at Close given back", got)
	}
}
