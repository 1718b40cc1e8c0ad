package httpapi

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
	conn := waitFor(t, b.conns, "open")

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
	waitFor(t, conn.held, "the request to reach the server")

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
	reply := waitFor(t, got, "the resumed stream")
	if !strings.HasPrefix(reply, "200 ") || !strings.Contains(reply, `"released":true`) {
		t.Fatalf("resumed stream: %s", reply)
	}
}
