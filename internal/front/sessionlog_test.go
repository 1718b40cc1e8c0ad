package front

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// jsonLog is a goroutine-safe buffer of JSON log lines.
type jsonLog struct{ testkit.SyncBuffer }

func (l *jsonLog) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// records returns the records with message msg.
func (l *jsonLog) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// closedLine returns the one "session closed" record of session sid.
func (l *jsonLog) closedLine(t *testing.T, sid string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, rec := range l.records(t, "session closed") {
		if rec["session"] == sid[:logIDLen] {
			found = append(found, rec)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d close lines for session %s in:\n%s", len(found), sid[:logIDLen], l.String())
	}
	return found[0]
}

// Each established session logs one open line and one close line, at info,
// naming why it ended, its age and the requests it took.
func TestSessionOpenCloseLogged(t *testing.T) {
	var logs jsonLog
	h, srv := testServer(t, newFakeBackend(), Config{Logger: logs.logger()})
	deleted, expired, atShutdown := initSession(t, srv), initSession(t, srv), initSession(t, srv)
	for _, id := range []string{"1", "2"} {
		do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`,
			"Mcp-Session-Id", deleted, "Mcp-Protocol-Version", "2025-06-18")
	}
	do(t, srv, http.MethodDelete, mcpPath, "", "Mcp-Session-Id", deleted)
	// Expiry: only the session made idle on purpose.
	h.store.Lookup(atShutdown).Begin()
	h.Sweep(time.Now().Add(time.Hour))
	h.store.Lookup(atShutdown).End(time.Now())
	h.Close()

	opened := logs.records(t, "session opened")
	if len(opened) != 3 {
		t.Fatalf("%d open lines:\n%s", len(opened), logs.String())
	}
	for _, rec := range opened {
		if rec["level"] != "INFO" || rec["server"] != "x" || rec["transport"] != "streamable" || rec["version"] != "2025-06-18" {
			t.Errorf("open line %v", rec)
		}
		if _, ok := rec["principal"]; ok {
			t.Errorf("open line %v names a principal without authentication", rec)
		}
	}
	for sid, want := range map[string]struct {
		reason   string
		requests float64
	}{
		deleted:    {"the client deleted the session", 3}, // initialize counts
		expired:    {"the session expired", 1},
		atShutdown: {"the gateway is shutting down", 1},
	} {
		rec := logs.closedLine(t, sid)
		if rec["level"] != "INFO" || rec["server"] != "x" || rec["reason"] != want.reason || rec["requests"] != want.requests {
			t.Errorf("close line %v, want reason %q and %v requests", rec, want.reason, want.requests)
		}
		if age, ok := rec["age"].(float64); !ok || age < 0 {
			t.Errorf("close line %v: age not a duration", rec)
		}
	}
	if strings.Contains(logs.String(), deleted) {
		t.Error("a full session id was logged")
	}
}

// A legacy SSE session is logged when its stream opens, and when it ends.
func TestLegacySessionLogged(t *testing.T) {
	var logs jsonLog
	h, srv := testServer(t, newFakeBackend(), Config{Logger: logs.logger()})
	c := openLegacy(t, srv)
	sid := c.endpoint[strings.Index(c.endpoint, "sessionId=")+len("sessionId="):]
	opened := logs.records(t, "session opened")
	if len(opened) != 1 || opened[0]["transport"] != "sse" || opened[0]["session"] != sid[:logIDLen] {
		t.Fatalf("open lines %v", opened)
	}
	c.accepted(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	c.next()
	h.Close()
	if rec := logs.closedLine(t, sid); rec["reason"] != "the gateway is shutting down" || rec["requests"] != float64(1) {
		t.Errorf("close line %v", rec)
	}
}

// A stateless request is a session inside the gateway, but neither its
// start nor its end is logged: one line per request would flood the log.
func TestStatelessRequestNotLogged(t *testing.T) {
	var logs jsonLog
	_, h, url := statelessServer(t, Config{Logger: logs.logger()})
	for _, id := range []string{"1", "2", "3"} {
		if resp, body := modernPost(t, url, modernBody(id, "tools/list", "")); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	h.Close()
	if out := logs.String(); strings.Contains(out, "session opened") || strings.Contains(out, "session closed") {
		t.Errorf("stateless requests logged as sessions:\n%s", out)
	}
}
