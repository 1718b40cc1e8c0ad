package front

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A client whose POST stream broke resumes it with Last-Event-ID before the
// gateway noticed the break (the old handler is still attached): the GET
// waits for the old reader to go and then gets the reply. It used to get 409
// "that stream is already open" at once: against the binary, 29% of 17,908
// prompt resumptions under load were refused.
func TestResumeRightAfterBreakWaitsForOldReader(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-11-25"
	_, srv := testServer(t, b, Config{})
	sid := initSession(t, srv)
	conn := testkit.Receive(t, b.conns, "open")

	// The POST's stream: read its priming event id, then keep the
	// connection open (the break is not noticed yet).
	postCtx, breakPost := context.WithCancel(context.Background())
	defer breakPost()
	req, _ := http.NewRequestWithContext(postCtx, http.MethodPost, srv.URL+mcpPath, strings.NewReader(holdReq))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	last := ""
	sc := bufio.NewScanner(resp.Body)
	for last == "" && sc.Scan() {
		last, _ = strings.CutPrefix(sc.Text(), "id: ")
	}
	testkit.Receive(t, conn.held, "the request to reach the server")

	got := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+mcpPath, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Last-Event-ID", last)
		resp, err := srv.Client().Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		got <- resp.Status + "\n" + string(body)
	}()
	// Now the gateway notices the break, after the client came back.
	time.Sleep(50 * time.Millisecond) // let the GET arrive first; the outcome does not depend on it
	breakPost()
	resp.Body.Close()
	conn.release()
	reply := testkit.Receive(t, got, "the resumed stream")
	if !strings.HasPrefix(reply, "200 ") || !strings.Contains(reply, `"released":true`) {
		t.Fatalf("resumed stream: %s", reply)
	}
}

// finishedPost POSTs a request answered at once in a 2025-11-25 session,
// reads the priming event's id and drops the connection there, as a client
// whose connection broke while the final reply was being written (it leaves
// with the end of the response, unflushed). It returns that id once the
// handler has finished.
func finishedPost(t *testing.T, h *Handler, srv *httptest.Server, sid string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+mcpPath, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"progress","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	sc := bufio.NewScanner(resp.Body)
	for last == "" && sc.Scan() {
		last, _ = strings.CutPrefix(sc.Text(), "id: ")
	}
	resp.Body.Close()
	if last == "" {
		t.Fatal("no priming event")
	}
	if !h.handlers.wait(10 * time.Second) {
		t.Fatal("the POST's handler did not finish")
	}
	return last
}

func resume(t *testing.T, srv *httptest.Server, sid, last string) (*http.Response, string) {
	t.Helper()
	return do(t, srv, http.MethodGet, mcpPath, "", "Accept", "text/event-stream",
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25", "Last-Event-ID", last)
}

// A client whose POST stream broke as its final reply was written resumes
// with the priming event's id after the handler finished, and gets the
// reply. It used to get 404 "the stream of that Last-Event-ID is gone": the
// handler forgot the stream right after writing its last event (2.6% of
// prompt resumptions under load).
func TestResumeAfterFinalWritten(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-11-25"
	h, srv := testServer(t, b, Config{})
	sid := initSession(t, srv)
	last := finishedPost(t, h, srv, sid)

	resp, body := resume(t, srv, sid, last)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `{"jsonrpc":"2.0","id":7,"result":{}}`) {
		t.Fatalf("resumed stream: %d %s", resp.StatusCode, body)
	}
	// Resuming does not end the grace: a second break is covered too.
	if resp, body := resume(t, srv, sid, last); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":7`) {
		t.Fatalf("resumed again: %d %s", resp.StatusCode, body)
	}
}

// After its resume grace a finished stream is gone, and the session keeps
// none of its bytes, once the idle sweep ran.
func TestFinishedStreamGoneAfterGrace(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-11-25"
	h, srv := testServer(t, b, Config{})
	sid := initSession(t, srv)
	last := finishedPost(t, h, srv, sid)
	s := h.store.Lookup(sid)
	if s.Bytes() == 0 {
		t.Fatal("the finished stream keeps nothing during its grace")
	}

	h.Sweep(time.Now().Add(session.DefaultResumeGrace))
	if n := s.Bytes(); n != 0 {
		t.Fatalf("the session keeps %d bytes after the grace", n)
	}
	resp, body := resume(t, srv, sid, last)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "the stream of that Last-Event-ID is gone") {
		t.Fatalf("resumed after the grace: %d %s", resp.StatusCode, body)
	}
	if s.Evicted() != 0 {
		t.Fatalf("a stream written out counted as evicted: %d", s.Evicted())
	}
}

// A negative ResumeGrace forgets a finished stream at once.
func TestNoResumeGrace(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-11-25"
	h, srv := testServer(t, b, Config{ResumeGrace: -1})
	sid := initSession(t, srv)
	last := finishedPost(t, h, srv, sid)
	if resp, body := resume(t, srv, sid, last); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("resumed with no grace: %d %s", resp.StatusCode, body)
	}
}

// sseLines returns the id and data lines of an SSE body, in order.
func sseLines(body string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "id: ") || strings.HasPrefix(l, "data: ") {
			out = append(out, l)
		}
	}
	return out
}

// A resume with Last-Event-ID gets strictly the events after the one it
// names: the named event was received, so sending it again (or an event
// bearing its id) makes the client see it twice.
func TestResumeReplaysStrictlyAfterNamedEvent(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-11-25"
	_, srv := testServer(t, b, Config{})
	sid := initSession(t, srv)
	_, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":7,"method":"progress","params":{}}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	lines := sseLines(body)
	var progressID string
	for i, l := range lines {
		if strings.Contains(l, "notifications/progress") && i > 0 {
			progressID = strings.TrimPrefix(lines[i-1], "id: ")
		}
	}
	if progressID == "" {
		t.Fatalf("no progress event with an id in %q", lines)
	}
	resp, rbody := resume(t, srv, sid, progressID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d %s", resp.StatusCode, rbody)
	}
	for _, l := range sseLines(rbody) {
		if l == "id: "+progressID || strings.Contains(l, "notifications/progress") {
			t.Errorf("the resume replays the named event %s: %q", progressID, sseLines(rbody))
		}
	}
	if !strings.Contains(rbody, `"id":7,"result"`) {
		t.Errorf("the resume lacks the reply after the named event: %q", rbody)
	}
}
