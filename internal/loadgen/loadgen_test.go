package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/sse"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer serves the real fixture; call is, if set, used instead of the
// fixture for tools/call requests.
func echoServer(t *testing.T, call func(w http.ResponseWriter, r *http.Request, msg []byte)) (*httptest.Server, *echoserver.Handler) {
	t.Helper()
	h := echoserver.NewHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if call != nil && r.Method == http.MethodPost {
			msg, _ := io.ReadAll(r.Body)
			if bytes.Contains(msg, []byte(`"tools/call"`)) {
				call(w, r, msg)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(msg))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv, h
}

// writeReply answers as the gateway would: SSE with a priming event for
// 2025-11-25, else JSON.
func writeReply(w http.ResponseWriter, r *http.Request, reply []byte) {
	if r.Header.Get("Mcp-Protocol-Version") < "2025-11-25" {
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse.Write(w, sse.Event{ID: "1-0", Retry: time.Second})
	sse.Write(w, sse.Event{ID: "1-1", Event: "message", Data: []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"noise"}}`)})
	if reply != nil {
		sse.Write(w, sse.Event{ID: "1-2", Event: "message", Data: reply})
	}
}

func quick(url, version string) Options {
	return Options{URL: url, Sessions: 4, Concurrency: 2, Duration: 200 * time.Millisecond, Warmup: 20 * time.Millisecond, Version: version}
}

func TestRunAgainstEcho(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run(version, func(t *testing.T) {
			srv, h := echoServer(t, nil)
			var progress []Progress
			o := quick(srv.URL, version)
			o.Progress = func(p Progress) { progress = append(progress, p) }
			o.ProgressInterval = 20 * time.Millisecond
			res, err := Run(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 || res.Crossed != 0 || res.FirstError != "" {
				t.Fatalf("errors %d crossed %d: %s", res.Errors, res.Crossed, res.FirstError)
			}
			if res.Sessions != 4 || res.Concurrency != 2 || res.Calls == 0 || res.Latency.Count() != res.Calls {
				t.Fatalf("result %+v", res)
			}
			if res.Elapsed < o.Duration || res.CallsPerSec <= 0 || res.P(0.5) <= 0 || res.P(0.5) > res.Latency.Max() {
				t.Fatalf("elapsed %v, %v calls/s, p50 %v max %v", res.Elapsed, res.CallsPerSec, res.P(0.5), res.Latency.Max())
			}
			if h.Sessions() != 0 {
				t.Errorf("%d sessions left on the server; Run must delete them", h.Sessions())
			}
			if len(progress) == 0 || progress[len(progress)-1].Opened != 4 {
				t.Errorf("progress %+v", progress)
			}
		})
	}
}

// TestRunDetectsCrossing runs against a server that answers each call with
// the reply computed for the call before it, from whichever session: the
// classic "next line is the reply to the last request" bug.
func TestRunDetectsCrossing(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			var mu sync.Mutex
			var previous []byte
			srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request, msg []byte) {
				mine, _, _ := echoserver.AppendReply(nil, msg)
				mu.Lock()
				out := previous
				previous = mine
				mu.Unlock()
				if out == nil {
					out = mine
				}
				writeReply(w, r, out)
			})
			res, err := Run(t.Context(), quick(srv.URL, version))
			if err != nil {
				t.Fatal(err)
			}
			if res.Crossed == 0 || res.Calls > 1 || res.Errors != 0 {
				t.Fatalf("crossed %d calls %d errors %d (%s): every reply but the first is someone else's", res.Crossed, res.Calls, res.Errors, res.FirstError)
			}
		})
	}
}

// TestRunSwappedSessionsSameIDs swaps replies between two sessions whose
// request ids are equal: the id check alone cannot see it, the text must.
func TestRunSwappedSessionsSameIDs(t *testing.T) {
	var n atomic.Int64
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request, msg []byte) {
		reply, _, _ := echoserver.AppendReply(nil, msg)
		if n.Add(1)%3 == 0 {
			reply = bytes.Replace(reply, []byte(`-s0-`), []byte(`-s1-`), 1)
		}
		writeReply(w, r, reply)
	})
	o := quick(srv.URL, "2025-06-18")
	o.Sessions, o.Concurrency = 2, 1
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Crossed == 0 || res.Errors != 0 || res.Calls == 0 {
		t.Fatalf("crossed %d errors %d calls %d", res.Crossed, res.Errors, res.Calls)
	}
}

func TestRunCountsErrors(t *testing.T) {
	tests := []struct {
		name, version, want string
		call                func(w http.ResponseWriter, r *http.Request, msg []byte)
	}{
		{"JSON-RPC error", "2025-06-18", "JSON-RPC error", func(w http.ResponseWriter, r *http.Request, msg []byte) {
			writeReply(w, r, []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`))
		}},
		{"HTTP 500", "2025-06-18", "500", func(w http.ResponseWriter, r *http.Request, msg []byte) {
			http.Error(w, "down", http.StatusInternalServerError)
		}},
		{"lost reply", "2025-11-25", "without a JSON-RPC reply", func(w http.ResponseWriter, r *http.Request, msg []byte) {
			writeReply(w, r, nil) // priming and a notification, then the stream ends
		}},
		{"202 for a request", "2025-06-18", "202", func(w http.ResponseWriter, r *http.Request, msg []byte) {
			w.WriteHeader(http.StatusAccepted)
		}},
		{"stateless result not complete", "2026-07-28", `resultType "input_required"`, func(w http.ResponseWriter, r *http.Request, msg []byte) {
			reply, _, _ := echoserver.AppendReply(nil, msg)
			writeReply(w, r, bytes.Replace(reply, []byte(`"complete"`), []byte(`"input_required"`), 1))
		}},
		{"stateless result without resultType", "2026-07-28", `resultType ""`, func(w http.ResponseWriter, r *http.Request, msg []byte) {
			reply, _, _ := echoserver.AppendReply(nil, msg)
			writeReply(w, r, bytes.Replace(reply, []byte(`"resultType":"complete",`), nil, 1))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := echoServer(t, tt.call)
			res, err := Run(t.Context(), quick(srv.URL, tt.version))
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors == 0 || res.Crossed != 0 || res.Calls != 0 || !strings.Contains(res.FirstError, tt.want) {
				t.Fatalf("errors %d crossed %d calls %d first %q; want errors only, mentioning %q", res.Errors, res.Crossed, res.Calls, res.FirstError, tt.want)
			}
		})
	}
}

func TestRunFailsWhenSessionsCannotOpen(t *testing.T) {
	var inits atomic.Int64
	h := echoserver.NewHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" && inits.Add(1) > 2 {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "too many sessions", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer h.Close()
	_, err := Run(t.Context(), quick(srv.URL, ""))
	if err == nil || !strings.Contains(err.Error(), "2 of 4 sessions failed") {
		t.Fatalf("Run = %v, want 2 of 4 sessions failed", err)
	}
	if h.Sessions() != 0 {
		t.Errorf("the sessions that opened were not deleted: %d left", h.Sessions())
	}
}

func TestRunOptions(t *testing.T) {
	for _, url := range []string{"", "ftp://x/mcp", "127.0.0.1:80"} {
		if _, err := Run(t.Context(), Options{URL: url}); err == nil {
			t.Errorf("URL %q accepted", url)
		}
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	srv, _ := echoServer(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	o := quick(srv.URL, "")
	o.Duration = time.Hour
	o.ProgressInterval = 10 * time.Millisecond
	o.Progress = func(p Progress) {
		if p.Phase == "measuring" && p.Calls > 0 {
			cancel()
		}
	}
	res, err := Run(ctx, o)
	if err != context.Canceled || res.Errors != 0 {
		t.Fatalf("Run = %v, errors %d; want context.Canceled and no errors", err, res.Errors)
	}
}

func TestCustomHeaders(t *testing.T) {
	var missing atomic.Int64
	h := echoserver.NewHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			missing.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	o := quick(srv.URL, "")
	o.Header = http.Header{"Authorization": {"Bearer t"}}
	if _, err := Run(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if missing.Load() != 0 {
		t.Errorf("%d requests without the header", missing.Load())
	}
}

// TestRunLargeMessages sends 1 MiB messages through the real fixture, as
// JSON bodies and as SSE streams, and checks every byte comes back.
func TestRunLargeMessages(t *testing.T) {
	const size = 1 << 20
	for _, tt := range []struct {
		version string
		sse     bool
	}{{"2025-06-18", false}, {"2025-11-25", false}, {"2025-11-25", true}, {"2026-07-28", false}} {
		t.Run(fmt.Sprintf("%s sse=%v", tt.version, tt.sse), func(t *testing.T) {
			srv, h := echoServer(t, nil)
			h.SSEReplies = tt.sse
			o := quick(srv.URL, tt.version)
			o.Sessions, o.Concurrency, o.Size = 2, 1, size
			o.Warmup, o.Duration = 0, time.Second // a megabyte call is slow under -race
			res, err := Run(t.Context(), o)
			// A window in which no call completed (a busy machine, -race)
			// says nothing: measure again with twice the window, bounded.
			for err == nil && res.Calls == 0 && res.Errors == 0 && o.Duration < 8*time.Second {
				o.Duration *= 2
				res, err = Run(t.Context(), o)
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 || res.Crossed != 0 || res.Calls == 0 {
				t.Fatalf("errors %d crossed %d calls %d: %s", res.Errors, res.Crossed, res.Calls, res.FirstError)
			}
			if res.PayloadBytes != res.Calls*size || res.BytesPerSec != float64(res.PayloadBytes)/res.Elapsed.Seconds() {
				t.Fatalf("payload %d bytes over %d calls, %.0f B/s", res.PayloadBytes, res.Calls, res.BytesPerSec)
			}
		})
	}
}

// TestRunLargeMessagesChecked: a server that damages one byte near the end
// of a large echo makes every call an error (not crossed: the id and unique
// part are the caller's own), and one that returns another session's large
// echo makes calls crossed.
func TestRunLargeMessagesChecked(t *testing.T) {
	const size = 1 << 20
	var mu sync.Mutex
	var previous []byte
	tests := []struct {
		name                string
		call                func(w http.ResponseWriter, r *http.Request, msg []byte)
		wantErrs, wantCross bool
	}{
		{"damaged", func(w http.ResponseWriter, r *http.Request, msg []byte) {
			reply, _, _ := echoserver.AppendReply(nil, msg)
			if len(msg) > size {
				reply[len(reply)-100] ^= 1 // inside the filler: still plain ASCII
			}
			writeReply(w, r, reply)
		}, true, false},
		{"crossed", func(w http.ResponseWriter, r *http.Request, msg []byte) {
			mine, _, _ := echoserver.AppendReply(nil, msg)
			mu.Lock()
			out := previous
			if len(msg) > size {
				previous = mine
			}
			mu.Unlock()
			if out == nil || len(msg) < size {
				out = mine // the sessions' first, short, calls are answered rightly
			}
			writeReply(w, r, out)
		}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := echoServer(t, tt.call)
			o := quick(srv.URL, "2025-11-25")
			o.Size = size
			res, err := Run(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			if (res.Errors > 0) != tt.wantErrs || (res.Crossed > 0) != tt.wantCross || res.Calls > 1 {
				t.Fatalf("errors %d crossed %d calls %d (%s)", res.Errors, res.Crossed, res.Calls, res.FirstError)
			}
			if tt.wantErrs && !strings.Contains(res.FirstError, "differs from the message") {
				t.Fatalf("first error %q", res.FirstError)
			}
		})
	}
}

// TestRunTimesOpens: every session's open (initialize to its first call's
// reply) is timed; with OpenParallel 1 no two opens overlap; and no request
// id is used twice in a session (the first call and the callers share the
// session's numbering).
func TestRunTimesOpens(t *testing.T) {
	h := echoserver.NewHandler()
	var opening, most atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}   // guarded by mu: session and request id
	called := map[string]bool{} // guarded by mu: sessions that made a call
	var reused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" { // initialize
			n := opening.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond) // widen the window in which opens could overlap
		}
		if m, err := jsonrpc.Parse(body); err == nil && m.Kind == jsonrpc.KindRequest && m.MethodIs("tools/call") {
			key := sid + "/" + string(m.Bytes(m.ID))
			mu.Lock()
			if seen[key] {
				reused.Add(1)
			}
			seen[key] = true
			first := !called[sid]
			called[sid] = true
			mu.Unlock()
			if first {
				opening.Add(-1) // a session's first call ends its open
			}
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer h.Close()
	o := quick(srv.URL, "2025-11-25")
	o.Sessions, o.OpenParallel = 6, 1
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Open.Count() != 6 || res.Open.Min() < 2*time.Millisecond || res.Open.Quantile(0.99) > res.Open.Max() {
		t.Fatalf("open: %d timed, min %v, p99 %v", res.Open.Count(), res.Open.Min(), res.Open.Quantile(0.99))
	}
	if most.Load() != 1 {
		t.Errorf("%d sessions opened at once, want 1", most.Load())
	}
	if reused.Load() != 0 || res.Errors != 0 || res.Crossed != 0 {
		t.Errorf("%d request ids reused in a session; errors %d crossed %d", reused.Load(), res.Errors, res.Crossed)
	}
}

// TestRunStateless: a run of 2026-07-28 opens each client with one
// server/discover, then makes only stateless calls: no initialize, no
// session header, no GET or DELETE, and every POST with the revision's
// headers matching its body (the fixture refuses others with 400).
func TestRunStateless(t *testing.T) {
	h := echoserver.NewHandler()
	var discovers, calls, bad atomic.Int64
	var firstBad atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		m, err := jsonrpc.Parse(body)
		switch {
		case r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || err != nil || m.Kind != jsonrpc.KindRequest:
		case m.MethodIs("server/discover") && r.Header.Get("Mcp-Method") == "server/discover":
			discovers.Add(1)
		case m.MethodIs("tools/call") && r.Header.Get("Mcp-Name") == "echo":
			calls.Add(1)
		default:
			bad.Add(1)
			firstBad.CompareAndSwap(nil, r.Method+" "+string(body))
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer h.Close()
	o := quick(srv.URL, "2026-07-28")
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if bad.Load() != 0 {
		t.Fatalf("%d requests not of the stateless revision, first %v", bad.Load(), firstBad.Load())
	}
	if discovers.Load() != 4 || res.Open.Count() != 4 || res.Errors != 0 || res.Crossed != 0 || uint64(calls.Load()) < res.Calls+4 {
		t.Fatalf("%d discovers, %d opens timed, %d calls seen for %d measured; errors %d crossed %d (%s)",
			discovers.Load(), res.Open.Count(), calls.Load(), res.Calls, res.Errors, res.Crossed, res.FirstError)
	}
	if h.Sessions() != 0 {
		t.Errorf("%d sessions on the server", h.Sessions())
	}
}

// TestRunStatelessNeedsDiscover: a server whose server/discover does not
// list the version fails the opens, naming what it listed.
func TestRunStatelessNeedsDiscover(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"resultType":"complete","supportedVersions":["2025-11-25"],"capabilities":{}}}`)
	}))
	defer srv.Close()
	_, err := Run(t.Context(), quick(srv.URL, "2026-07-28"))
	if err == nil || !strings.Contains(err.Error(), `supportedVersions ["2025-11-25"] lacks 2026-07-28`) {
		t.Fatalf("Run = %v", err)
	}
}

// notEcho answers a tools/call with text, not the message, as a server
// whose "echo" tool is something else would (a stateless call's result is
// still "complete").
func notEcho(text string) func(w http.ResponseWriter, r *http.Request, msg []byte) {
	return func(w http.ResponseWriter, r *http.Request, msg []byte) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(msg, &req)
		result, _ := json.Marshal(map[string]any{
			"content": []map[string]string{{"type": "text", "text": text}}, "resultType": "complete",
		})
		writeReply(w, r, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result))
	}
}

// TestRunNotEchoing: a server whose echo returns no message of the run
// (a constant, an empty text) is told apart from a routing bug: its
// replies are counted as not echoed, never as crossed, nor as errors. One
// that wraps the message ("Echo: " + it) echoes it, damaged: errors.
func TestRunNotEchoing(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		for _, text := range []string{"ok", "", "tool ran at 2026-01-02T03:04:05Z-s0-c0-1"} {
			t.Run(version+"/"+text, func(t *testing.T) {
				srv, _ := echoServer(t, notEcho(text))
				res, err := Run(t.Context(), quick(srv.URL, version))
				if err != nil {
					t.Fatal(err)
				}
				if res.NotEchoed == 0 || res.Crossed != 0 || res.Errors != 0 || res.Calls != 0 {
					t.Fatalf("not echoed %d crossed %d errors %d calls %d (%s); want only not echoed",
						res.NotEchoed, res.Crossed, res.Errors, res.Calls, res.FirstError)
				}
			})
		}
	}
	t.Run("wrapped", func(t *testing.T) {
		srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request, msg []byte) {
			reply, _, _ := echoserver.AppendReply(nil, msg)
			writeReply(w, r, bytes.Replace(reply, []byte(`"text":"`), []byte(`"text":"Echo: `), 1))
		})
		res, err := Run(t.Context(), quick(srv.URL, "2025-06-18"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors == 0 || res.Crossed != 0 || res.NotEchoed != 0 || !strings.Contains(res.FirstError, "differs from the message") {
			t.Fatalf("errors %d crossed %d not echoed %d (%s); want errors: the message wrapped", res.Errors, res.Crossed, res.NotEchoed, res.FirstError)
		}
	})
}

// TestRunWindowOutlastsOneCall: every call takes longer than the measured
// window (a large payload, a busy machine): the window lasts until one
// call begun in it has ended, so the run measures it instead of nothing.
func TestRunWindowOutlastsOneCall(t *testing.T) {
	const window = 30 * time.Millisecond
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request, msg []byte) {
		time.Sleep(3 * window) // the fixture's slowness, not the test's wait
		reply, _, _ := echoserver.AppendReply(nil, msg)
		writeReply(w, r, reply)
	})
	o := Options{URL: srv.URL, Sessions: 1, Concurrency: 1, Duration: window, Version: "2025-06-18"}
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls == 0 || res.Errors != 0 || res.Elapsed < 3*window {
		t.Fatalf("calls %d errors %d elapsed %v: want the call begun in the window measured", res.Calls, res.Errors, res.Elapsed)
	}
}

// TestRunWindow: Window is called once as the measured window opens and
// once as it closes, around every measured call: calls answered while it
// is open are the ones counted.
func TestRunWindow(t *testing.T) {
	var mu sync.Mutex
	var events []string
	var inWindow atomic.Bool
	var answeredOutside atomic.Int64
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request, msg []byte) {
		reply, _, _ := echoserver.AppendReply(nil, msg)
		if !inWindow.Load() {
			answeredOutside.Add(1)
		}
		writeReply(w, r, reply)
	})
	res, err := Run(t.Context(), Options{URL: srv.URL, Sessions: 2, Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond,
		Window: func(open bool) {
			inWindow.Store(open)
			mu.Lock()
			events = append(events, fmt.Sprint(open))
			mu.Unlock()
		}})
	if err != nil || res.Calls == 0 {
		t.Fatalf("Run = %d calls, %v", res.Calls, err)
	}
	if strings.Join(events, ",") != "true,false" {
		t.Fatalf("Window calls %v, want [true false]", events)
	}
	if answeredOutside.Load() == 0 {
		t.Fatal("no call was answered outside the window (the sessions' first calls and warmup are)")
	}
}
