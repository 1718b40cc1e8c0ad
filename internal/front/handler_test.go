package front

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/session"
)

func TestAccepts(t *testing.T) {
	tests := []struct {
		header, want string
		ok           bool
	}{
		{"application/json, text/event-stream", "application/json", true},
		{"application/json, text/event-stream", "text/event-stream", true},
		{"text/event-stream;q=0.9,application/json;q=1", "application/json", true},
		{"*/*", "text/event-stream", true},
		{"text/*", "text/event-stream", true},
		{"application/*", "text/event-stream", false},
		{"application/json", "text/event-stream", false},
		{"", "application/json", false},
		{"application/jsonx", "application/json", false},
		{"garbage;;;, application/json", "application/json", true},
	}
	for _, tt := range tests {
		if got := accepts(tt.header, tt.want); got != tt.ok {
			t.Errorf("accepts(%q, %q) = %v, want %v", tt.header, tt.want, got, tt.ok)
		}
	}
}

// FuzzAccepts: the Accept parser never panics, and a header that lists the
// wanted type verbatim is always accepted whatever else it holds.
func FuzzAccepts(f *testing.F) {
	f.Add("application/json, text/event-stream")
	f.Add("*/*;q=0.1")
	f.Add(`text/event-stream; charset="x`)
	f.Fuzz(func(t *testing.T, header string) {
		_ = accepts(header, "application/json")
		if !strings.ContainsAny(header, "\x00") && !accepts(header+", text/event-stream", "text/event-stream") {
			t.Fatalf("%q plus the wanted type was refused", header)
		}
	})
}

// countingDirectory is a session.Directory that records, by session id,
// every call the Handler makes through it.
type countingDirectory struct {
	session.Directory
	mu    sync.Mutex
	calls map[string][]string // guarded by mu: by session id, in order
}

func (d *countingDirectory) record(id, call string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[id] = append(d.calls[id], call)
}

func (d *countingDirectory) Create(server, owner string, now time.Time) (*session.Session, error) {
	s, err := d.Directory.Create(server, owner, now)
	if err == nil {
		d.record(s.ID, "create "+server)
	}
	return s, err
}

func (d *countingDirectory) Lookup(id string) *session.Session {
	d.record(id, "lookup")
	return d.Directory.Lookup(id)
}

func (d *countingDirectory) Delete(id string) *session.Session {
	s := d.Directory.Delete(id)
	if s != nil {
		d.record(id, "delete")
	}
	return s
}

func (d *countingDirectory) of(id string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls[id])
}

// Every step of a session's life goes through Config.Sessions: the
// Handler keeps no session anywhere else.
func TestSessionLifeGoesThroughTheDirectory(t *testing.T) {
	dir := &countingDirectory{Directory: session.NewStore(session.Limits{}), calls: map[string][]string{}}
	h, srv := testServer(t, newFakeBackend(), Config{Sessions: dir})
	sid := initSession(t, srv)
	seen := 0
	// step checks the calls made for the session since the last step:
	// others exactly, besides lookups, at least one if lookups.
	step := func(what string, lookups bool, others ...string) {
		t.Helper()
		calls := dir.of(sid)
		got := calls[seen:]
		seen = len(calls)
		rest := slices.DeleteFunc(slices.Clone(got), func(c string) bool { return c == "lookup" })
		if !slices.Equal(rest, others) || lookups && len(rest) == len(got) {
			t.Errorf("%s: the directory saw %q, want %q and lookups %v", what, got, others, lookups)
		}
	}
	step("initialize", false, "create x")
	hdr := []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"}
	if resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, hdr...); resp.StatusCode != http.StatusOK {
		t.Fatalf("ping: %d %s", resp.StatusCode, body)
	}
	step("ping", true)
	if h.Sessions() != 1 || dir.Directory.Len() != 1 {
		t.Fatalf("%d sessions, %d in the directory; want the directory's one", h.Sessions(), dir.Directory.Len())
	}
	if resp, body := do(t, srv, http.MethodDelete, mcpPath, "", hdr...); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	step("DELETE", true, "delete")
	if resp, _ := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, hdr...); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("ping after DELETE: %d, want 404", resp.StatusCode)
	}
	step("ping after DELETE", true)
}
