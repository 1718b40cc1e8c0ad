package front

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/session"
)

// Resumption with Last-Event-ID, attacked: the id of a stream's last event
// resumes to nothing more (strictly after it, and the stream ends); an id
// naming an event its stream never sent is refused with 404, like one of
// a stream that is gone. It used to be accepted: a POST stream resumed
// from it skipped its final reply and ended (the request was never
// answered), and the standalone stream skipped every message until its
// numbers reached the one named, holding the GET open with nothing.
func TestResumeFromAnEventNeverSent(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-11-25"
	_, srv := testServer(t, b, Config{})
	sid := initSession(t, srv)
	_, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":7,"method":"progress","params":{}}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	var last string
	for _, l := range sseLines(body) {
		if id, ok := strings.CutPrefix(l, "id: "); ok {
			last = id
		}
	}
	stream, seq, ok := session.ParseEventID(last)
	if !ok || !strings.Contains(body, `"id":7,"result"`) {
		t.Fatalf("POST stream without a last event id or reply: %q", body)
	}

	resp, rbody := resume(t, srv, sid, last)
	if resp.StatusCode != http.StatusOK || strings.Contains(rbody, "data: {") {
		t.Errorf("resumed from the last event: %d %q, want 200 and no event", resp.StatusCode, rbody)
	}
	for _, id := range []string{
		session.EventID(stream, seq+1),
		session.EventID(stream, 1<<62),
		session.EventID(0, 999999), // the standalone stream's
		strconv.FormatUint(stream, 10) + "-18446744073709551615",
	} {
		if resp, rbody := resume(t, srv, sid, id); resp.StatusCode != http.StatusNotFound {
			t.Errorf("resumed from %s, never sent: %d %q, want 404", id, resp.StatusCode, rbody)
		}
	}
}

// A resumed stream sets the client's retry time without sending an event
// of empty data: on a 2025-06-18 session (whose clients know no priming
// event and parse every event's data as a message) as on a 2025-11-25 one.
// The retry came as "retry: N" with an empty "data:" line, dispatched by
// every SSE reader as a message event of empty data.
func TestResumeSendsNoEmptyEvent(t *testing.T) {
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		b := newFakeBackend()
		b.version = version
		_, srv := testServer(t, b, Config{Retry: 1500 * time.Millisecond})
		sid := initSession(t, srv)
		_, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":7,"method":"progress","params":{}}`,
			"Mcp-Session-Id", sid, "Mcp-Protocol-Version", version)
		var first string // the progress event's id
		for _, l := range sseLines(body) {
			if id, ok := strings.CutPrefix(l, "id: "); ok && first == "" && !strings.HasSuffix(id, "-0") {
				first = id
			}
		}
		if first == "" {
			t.Fatalf("%s: no event id in %q", version, body)
		}
		resp, rbody := do(t, srv, http.MethodGet, mcpPath, "", "Accept", "text/event-stream",
			"Mcp-Session-Id", sid, "Mcp-Protocol-Version", version, "Last-Event-ID", first)
		if resp.StatusCode != http.StatusOK || !strings.Contains(rbody, `data: {"jsonrpc":"2.0","id":7,"result":{}}`) {
			t.Fatalf("%s: resumed from %s: %d %q", version, first, resp.StatusCode, rbody)
		}
		if !strings.HasPrefix(rbody, "retry: 1500\n\n") {
			t.Errorf("%s: resumed stream %q does not start with the retry time alone", version, rbody)
		}
		for _, l := range strings.Split(rbody, "\n") {
			if strings.HasPrefix(l, "data:") && !strings.HasPrefix(l, "data: {") {
				t.Errorf("%s: resumed stream has a data line that is no message: %q in %q", version, l, rbody)
			}
		}
	}
}
