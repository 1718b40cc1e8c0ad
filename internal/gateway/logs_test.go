package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file checks what an operator reads in the gateway's log: each
// server's "server ready" line with its startup time (again after a
// restart), each session's open and close lines, and servers' stderr
// lines at their own levels.

// opLog is the gateway's log as JSON lines, safe for concurrent use.
type opLog struct{ buf testkit.SyncBuffer }

// records returns the records whose message is msg and whose attributes
// include every pair of match.
func (l *opLog) records(t *testing.T, msg string, match map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.buf.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		ok := rec["msg"] == msg
		for k, v := range match {
			ok = ok && rec[k] == v
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

// wait waits for one record of msg matching match: lines are logged by the
// goroutine that got there, which may come after the reply the test saw.
func (l *opLog) wait(t *testing.T, msg string, match map[string]any) map[string]any {
	t.Helper()
	var got []map[string]any
	testkit.WaitFor(t, msg+" line", func() bool {
		got = l.records(t, msg, match)
		return len(got) > 0
	})
	if len(got) != 1 {
		t.Fatalf("%d %q lines matching %v:\n%s", len(got), msg, match, l.buf.String())
	}
	return got[0]
}

// startGatewayLogging is startGateway with the gateway logging to logs
// (JSON, at info).
func startGatewayLogging(t *testing.T, cfg *config.Config, logs *opLog) *testGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := Start(cfg, slog.New(slog.NewJSONHandler(&logs.buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.serve(ctx, ln) }()
	tr := &http.Transport{}
	g := &testGateway{URL: "http://" + ln.Addr().String(), http: &http.Client{Transport: tr}, gw: gw}
	stopped := false
	g.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				return err
			}
			tr.CloseIdleConnections()
		}
		return nil
	}
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Errorf("gateway stop: %v", err)
		}
	})
	return g
}

// durationAttr reads a JSON log duration (nanoseconds).
func durationAttr(t *testing.T, rec map[string]any, key string) time.Duration {
	t.Helper()
	n, ok := rec[key].(float64)
	if !ok {
		t.Fatalf("%s is not a duration in %v", key, rec)
	}
	return time.Duration(n)
}

func TestOperationsLogged(t *testing.T) {
	stderr := strings.Join([]string{
		"ERROR: bad token",
		`{"level":"warn","msg":"slow start"}`,
		"[debug] hidden",
		"plain line",
	}, "\n")
	var logs opLog
	began := time.Now()
	g := startGatewayLogging(t, newConfig(fakeServer("memory", testkit.FakeOptions{Stderr: stderr})), &logs)

	// The server: ready with its startup time, then its stderr.
	ready := logs.wait(t, "server ready", map[string]any{"server": "memory", "gen": float64(1)})
	pid, _ := ready["pid"].(float64)
	if startup := durationAttr(t, ready, "startup"); startup <= 0 || startup > time.Since(began) || pid <= 0 || ready["level"] != "INFO" {
		t.Errorf("ready line %v", ready)
	}
	if _, ok := ready["restarts"]; ok {
		t.Errorf("first start logged with restarts: %v", ready)
	}
	for line, level := range map[string]string{
		"ERROR: bad token":                    "ERROR",
		`{"level":"warn","msg":"slow start"}`: "WARN",
		"plain line":                          "INFO",
	} {
		rec := logs.wait(t, line, map[string]any{"server": "memory", "stream": "stderr"})
		if rec["level"] != level || rec["pid"] != pid {
			t.Errorf("stderr line %v, want level %s and pid %v", rec, level, pid)
		}
	}
	if got := logs.records(t, "[debug] hidden", nil); len(got) != 0 {
		t.Errorf("a debug stderr line logged at info: %v", got)
	}

	// Sessions: a deleted one, one ended by the shutdown, and stateless
	// requests, which log nothing.
	deleted, kept := g.client("memory"), g.client("memory")
	deleted.connect(t)
	kept.connect(t)
	deleted.post(t, callBody("1", "echo", map[string]string{"message": "hi"}, "")).final(t)
	if r := deleted.do(t, deleted.request(http.MethodDelete, ""), nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", r.Status)
	}
	for _, id := range []string{"7", "8"} {
		if status, m := modernCall(t, g, "memory", id, "echo", map[string]string{"message": "x"}, ""); status != http.StatusOK || m["error"] != nil {
			t.Fatalf("stateless call: %d %v", status, m)
		}
	}
	for _, c := range []*mcpClient{deleted, kept} {
		rec := logs.wait(t, "session opened", map[string]any{"session": c.session[:8]})
		if rec["server"] != "memory" || rec["transport"] != "streamable" || rec["version"] != "2025-11-25" {
			t.Errorf("open line %v", rec)
		}
	}
	closed := logs.wait(t, "session closed", map[string]any{"session": deleted.session[:8]})
	if closed["reason"] != "the client deleted the session" || closed["requests"] != float64(2) || durationAttr(t, closed, "age") < 0 {
		t.Errorf("close line %v", closed)
	}

	// A crash: the restarted process logs its own ready line.
	kept.post(t, callBody("2", "crash", map[string]any{}, "")).final(t)
	again := logs.wait(t, "server ready", map[string]any{"server": "memory", "gen": float64(2)})
	if again["restarts"] != float64(1) || again["pid"] == pid || durationAttr(t, again, "startup") <= 0 {
		t.Errorf("ready line after the restart %v (first pid %v)", again, pid)
	}

	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	shut := logs.wait(t, "session closed", map[string]any{"session": kept.session[:8]})
	if shut["reason"] != "the gateway is shutting down" || shut["requests"] != float64(2) {
		t.Errorf("close line at shutdown %v", shut)
	}
	if n := len(logs.records(t, "session opened", nil)); n != 2 {
		t.Errorf("%d open lines, want 2 (stateless requests are not sessions to log):\n%s", n, logs.buf.String())
	}
	if n := len(logs.records(t, "session closed", nil)); n != 2 {
		t.Errorf("%d close lines, want 2:\n%s", n, logs.buf.String())
	}
}
