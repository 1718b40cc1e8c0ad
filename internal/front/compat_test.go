package front

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A client quirk is counted every time and logged once per kind and client
// (User-Agent); past maxLoggedClients clients, once more to say so, then
// counted only.
func TestVersionQuirkLoggedOncePerClient(t *testing.T) {
	var logs testkit.SyncBuffer
	h := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(h.Close)
	from := func(ua string) *http.Request {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set("User-Agent", ua)
		return r
	}
	const line = "accepted though it does not match"
	for range 3 {
		h.accepted(from("claude-code/2.1"), MismatchRepeated, "2025-11-25, 2025-11-25", "2025-11-25")
	}
	h.accepted(from("claude-code/2.1"), MismatchSessionOther, "2026-07-28", "2025-11-25")
	h.accepted(from("Claude-User"), MismatchBodyNewer, "2025-11-25", "2026-07-28")
	if n := strings.Count(logs.String(), line); n != 3 {
		t.Fatalf("%d lines for 3 clients and kinds, want 3:\n%s", n, logs.String())
	}
	for i := range 2 * maxLoggedClients {
		h.accepted(from("client/"+strconv.Itoa(i)), MismatchBodyNewer, "2025-11-25", "2026-07-28")
	}
	if n := strings.Count(logs.String(), line); n != maxLoggedClients {
		t.Errorf("%d lines for many clients, want %d", n, maxLoggedClients)
	}
	if n := strings.Count(logs.String(), "counted, not logged"); n != 1 {
		t.Errorf("the bound was told %d times, want once", n)
	}
	c := h.CompatCounts().VersionHeaderMismatch
	if c[MismatchRepeated] != 3 || c[MismatchSessionOther] != 1 || c[MismatchBodyNewer] != 1+2*maxLoggedClients {
		t.Errorf("counted %v", c)
	}
}
