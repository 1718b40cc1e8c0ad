package front

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A legacy client that vanished (or stopped reading its stream) while it
// keeps POSTing cannot make the gateway hold an unbounded pile of replies:
// once the session's unread replies pass the stream's byte bound, new
// messages get 503 with Retry-After. The replies of a legacy session's
// stream are finals, never dropped, and used to pile up without bound until
// the grace period ended: against the binary, 400 POSTs of 1 MB echoes in
// 1.25 s grew the gateway by 110 MB, and a client that keeps its stream
// attached without reading holds them for as long as it likes.
func TestLegacyUnreadRepliesBounded(t *testing.T) {
	b := newFakeBackend()
	const bound = 4096
	// A grace far beyond testkit.WaitTimeout: the stream is let go because
	// the client left, not because the grace ran out.
	h, srv := testServer(t, b, Config{ReplayBytes: bound, LegacyGrace: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/servers/x/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	endpoint := ""
	for endpoint == "" && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			endpoint = d
		}
	}
	// The client vanishes; its session waits out the grace period.
	cancel()
	resp.Body.Close()
	sid := endpoint[strings.Index(endpoint, "sessionId=")+len("sessionId="):]
	s := h.store.Lookup(sid)
	if s == nil {
		t.Fatalf("no session %q", sid)
	}
	testkit.WaitFor(t, "the stream to be let go", func() bool { return !s.General().Attached() })

	refused := 0
	for i := range 200 {
		r, body := do(t, srv, http.MethodPost, endpoint, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"x","params":{"pad":%q}}`, i, strings.Repeat("p", 64)),
			"Content-Type", "application/json")
		switch r.StatusCode {
		case http.StatusAccepted:
		case http.StatusServiceUnavailable:
			if r.Header.Get("Retry-After") == "" || !strings.Contains(body, "not read") {
				t.Fatalf("refusal: %s %q", r.Header.Get("Retry-After"), body)
			}
			refused++
		default:
			t.Fatalf("POST %d: %d %s", i, r.StatusCode, body)
		}
	}
	// One batch of replies may land past the bound: the check is before
	// the messages are handled.
	if n := s.General().Bytes(); refused == 0 || n > 2*bound {
		t.Fatalf("%d of 200 POSTs refused; the stream keeps %d bytes (bound %d)", refused, n, bound)
	}
}
