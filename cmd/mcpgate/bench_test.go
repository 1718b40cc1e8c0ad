package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/echoserver"
	"go.uber.org/goleak"
)

func runBench(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := bench(args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// noLeaks checks, after the test's other cleanups (its servers closing),
// that the test left no goroutine behind. Call it first.
func noLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

func echoFixture(t *testing.T, wrap func(http.Handler) http.Handler) (*httptest.Server, *echoserver.Handler) {
	t.Helper()
	h := echoserver.NewHandler()
	var handler http.Handler = h
	if wrap != nil {
		handler = wrap(h)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv, h
}

func TestBenchJSON(t *testing.T) {
	noLeaks(t)
	srv, h := echoFixture(t, nil)
	r := runBench(t, "--url", srv.URL, "--sessions", "3", "--concurrency", "2", "--duration", "150ms", "--warmup", "10ms", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"calls_per_sec", "p50_us", "p90_us", "p99_us", "max_us", "calls", "errors", "crossed", "sessions",
		"bytes_per_call", "mb_per_sec", "opened", "open_p50_us", "open_p99_us"} {
		if _, ok := out[k]; !ok {
			t.Errorf("no %q in %s", k, r.stdout)
		}
	}
	if out["sessions"] != 3.0 || out["errors"] != 0.0 || out["crossed"] != 0.0 || out["calls"].(float64) <= 0 || out["p50_us"].(float64) <= 0 ||
		out["opened"] != 3.0 || out["open_p50_us"].(float64) <= 0 || out["open_p99_us"].(float64) < out["open_p50_us"].(float64) {
		t.Errorf("result %s", r.stdout)
	}
	if h.Sessions() != 0 {
		t.Errorf("%d sessions left", h.Sessions())
	}
}

// TestBenchSize sends 64 KiB messages one session at a time and checks the
// payload figures: every call carries exactly --size bytes each way.
func TestBenchSize(t *testing.T) {
	noLeaks(t)
	srv, _ := echoFixture(t, nil)
	r := runBench(t, "--url", srv.URL, "--sessions", "2", "--size", "65536", "--open-parallel", "1",
		"--duration", "300ms", "--warmup", "0s", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var out benchJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	want := out.CallsPerSec * 65536 / 1e6
	if out.Calls == 0 || out.BytesPerCall != 65536 || out.MBPerSec < want*0.999 || out.MBPerSec > want*1.001 || out.Opened != 2 {
		t.Errorf("result %+v; want 65536 bytes per call and %.3f MB/s", out, want)
	}
}

func TestBenchTable(t *testing.T) {
	noLeaks(t)
	srv, _ := echoFixture(t, nil)
	r := runBench(t, "--url", srv.URL, "--sessions", "2", "--duration", "100ms", "--warmup", "0s", "--version", "2025-06-18")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"sessions  2 x 1 callers", "calls/s", "p50 ", "p99 ", "errors    0", "crossed   0", "version 2025-06-18",
		"bytes per call", "MB/s each way", "(2 sessions, 64 at a time)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestBenchFailsOnBadReplies: a server whose tools/call fails makes bench
// exit 1 and say why.
func TestBenchFailsOnBadReplies(t *testing.T) {
	noLeaks(t)
	srv, _ := echoFixture(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" && r.ContentLength > 60 {
				http.Error(w, "broken", http.StatusBadGateway)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	r := runBench(t, "--url", srv.URL, "--sessions", "1", "--duration", "50ms", "--warmup", "0s", "--json")
	if r.code != exitFailure || !strings.Contains(r.stderr, "502") || !strings.Contains(r.stdout, `"errors":`) {
		t.Fatalf("exit %d, want 1 with the error\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestBenchStateless runs --version 2026-07-28 against the fixture: no
// session is opened, every client's open is timed, every reply checked.
func TestBenchStateless(t *testing.T) {
	noLeaks(t)
	srv, h := echoFixture(t, nil)
	r := runBench(t, "--url", srv.URL, "--version", "2026-07-28", "--sessions", "3", "--duration", "150ms", "--warmup", "0s", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var out benchJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Calls == 0 || out.Opened != 3 || out.Errors != 0 || out.Crossed != 0 || h.Sessions() != 0 {
		t.Errorf("result %+v, %d sessions on the server", out, h.Sessions())
	}
}

func TestBenchIdle(t *testing.T) {
	noLeaks(t)
	srv, h := echoFixture(t, nil)
	r := runBench(t, "--url", srv.URL, "--idle", "20", "--streams", "5", "--hold", "10ms", "--json", "--header", "X-Bench: yes")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var out idleJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Opened != 20 || out.Failed != 0 || out.Streams != 5 || out.StreamsFailed != 0 {
		t.Errorf("result %+v", out)
	}
	if !strings.Contains(r.stderr, "bench: holding") {
		t.Errorf("no holding progress line on stderr:\n%s", r.stderr)
	}
	if h.Sessions() != 0 {
		t.Errorf("%d sessions left", h.Sessions())
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--url", "127.0.0.1:8080"},
		{"--url", "http://x/mcp", "extra"},
		{"--url", "http://x/mcp", "--sessions", "0"},
		{"--url", "http://x/mcp", "--duration", "0s"},
		{"--url", "http://x/mcp", "--streams", "3"},
		{"--url", "http://x/mcp", "--idle", "2", "--streams", "3"},
		{"--url", "http://x/mcp", "--header", "no colon"},
		{"--url", "http://x/mcp", "--bogus"},
		{"--url", "http://x/mcp", "--size", "-1"},
		{"--url", "http://x/mcp", "--size", "8388609"},
		{"--url", "http://x/mcp", "--open-parallel", "0"},
		{"--url", "http://x/mcp", "--idle", "2", "--size", "100"},
		{"--url", "http://x/mcp", "--idle", "2", "--version", "2026-07-28"},
		{"--url", "http://x/mcp", "--proc", "-3"},
		{"--url", "http://x/mcp", "--idle", "2", "--proc", "1"},
	} {
		r := runBench(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "usage: mcpgate bench") {
			t.Errorf("bench %q: exit %d, want 2 with usage\n%s", args, r.code, r.stderr)
		}
	}
	r := runBench(t, "--help")
	if r.code != exitOK || !strings.Contains(r.stdout, "--concurrency") || !strings.Contains(r.stdout, "crossed") {
		t.Errorf("--help: exit %d\n%s", r.code, r.stdout)
	}
}

func TestHeaderFlags(t *testing.T) {
	h := headerFlags{}
	for _, v := range []string{"Authorization: Bearer x", "X-A:1", "x-a: 2"} {
		if err := h.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if got := http.Header(h); got.Get("Authorization") != "Bearer x" || len(got.Values("X-A")) != 2 {
		t.Errorf("headers %v", got)
	}
}

// TestBenchNotEchoing: against a server whose "echo" tool answers "ok"
// whatever it is sent, bench says so in one line and counts no crossed
// reply (it used to report every reply as crossed, like a routing bug).
func TestBenchNotEchoing(t *testing.T) {
	noLeaks(t)
	srv, _ := echoFixture(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &req) == nil && req.Method == "tools/call" {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, req.ID)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(w, r)
		})
	})
	r := runBench(t, "--url", srv.URL, "--sessions", "2", "--duration", "100ms", "--warmup", "0s", "--version", "2025-06-18")
	if r.code != exitFailure {
		t.Errorf("exit %d, want %d", r.code, exitFailure)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `the server's "echo" tool does not return its message`) || !strings.Contains(last, "0 errors, 0 crossed") {
		t.Errorf("last stderr line %q; want the one line saying the server does not echo", last)
	}
	if strings.Count(r.stderr, "does not return its message") != 1 {
		t.Errorf("said more than once:\n%s", r.stderr)
	}
	for _, want := range []string{"crossed     0", "errors      0", "not echoed  "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestBenchProc measures this test process (the fixture runs in it, over
// httptest) with --proc: its CPU time and context switches per call are
// read from /proc around the measured window and reported in the JSON and
// the table. A process that is not there fails the run, naming the flag.
func TestBenchProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	noLeaks(t)
	srv, _ := echoFixture(t, nil)
	pid := strconv.Itoa(os.Getpid())
	r := runBench(t, "--url", srv.URL, "--sessions", "2", "--duration", "300ms", "--warmup", "10ms", "--json", "--proc", pid)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out["proc_pid"] != float64(os.Getpid()) || out["proc_cpu_us_per_call"].(float64) <= 0 || out["proc_switches_per_call"].(float64) <= 0 {
		t.Errorf("--proc result %s", r.stdout)
	}
	for _, k := range []string{"proc_children", "proc_children_cpu_us_per_call", "proc_children_switches_per_call"} {
		if _, ok := out[k]; !ok {
			t.Errorf("no %q in %s", k, r.stdout)
		}
	}
	r = runBench(t, "--url", srv.URL, "--sessions", "1", "--duration", "100ms", "--warmup", "0s", "--proc", pid)
	if r.code != exitOK || !strings.Contains(r.stdout, "µs CPU per call") {
		t.Errorf("table with --proc: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBench(t, "--url", srv.URL, "--sessions", "1", "--duration", "100ms", "--warmup", "0s", "--proc", "1073741824")
	if r.code != exitFailure || !strings.Contains(r.stderr, "--proc 1073741824") {
		t.Errorf("--proc of no process: exit %d, want 1 naming it\n%s", r.code, r.stderr)
	}
}
