package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	testkit.Main()
	goleak.VerifyTestMain(m)
}

// testLogger sends the gateway's logs to the test log (warnings and up, so
// a failing test shows why without drowning in routine lines).
func testLogger(t testing.TB) *slog.Logger { return testkit.Logger(t, slog.LevelWarn) }

// TestConcurrentSessionsNoCrossing drives 200 sessions with 50 concurrent
// calls each through one shared process. Every session uses the same
// request ids and the same progress tokens, so any crossing shows: each
// reply must carry its caller's id byte for byte and its caller's message,
// and each progress notification must reach only its requester's stream.
func TestConcurrentSessionsNoCrossing(t *testing.T) {
	const sessions, calls = 200, 50
	marker := fmt.Sprintf("concurrency-%d", time.Now().UnixNano())
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{Marker: marker})))

	clients := make([]*mcpClient, sessions)
	for i := range clients {
		clients[i] = g.client("fake")
		clients[i].connect(t)
	}
	if n := len(testkit.Procs(marker)); n != 1 {
		t.Fatalf("shared mode runs %d processes, want 1", n)
	}
	var crossed, lost, progress atomic.Int64
	var wg sync.WaitGroup
	for s, c := range clients {
		for i := range calls {
			wg.Go(func() {
				// Ids alternate between numbers and strings; all collide across sessions.
				id := fmt.Sprint(i + 1)
				if i%2 == 1 {
					id = fmt.Sprintf(`"req-%d"`, i)
				}
				token := fmt.Sprintf(`"tok-%d"`, i)
				want := fmt.Sprintf("session %d call %d", s, i)
				r := c.post(t, callBody(id, "echo", map[string]string{"message": want}, `{"progressToken":`+token+`}`))
				if r.Status != http.StatusOK || len(r.Msgs) == 0 {
					lost.Add(1)
					t.Errorf("session %d call %d: status %d body %q", s, i, r.Status, r.Body)
					return
				}
				for _, raw := range r.Msgs[:len(r.Msgs)-1] {
					m := decode(t, raw)
					var p struct {
						ProgressToken json.RawMessage `json:"progressToken"`
					}
					_ = json.Unmarshal(m.Params, &p)
					if m.Method != "notifications/progress" || string(p.ProgressToken) != token {
						crossed.Add(1)
						t.Errorf("session %d call %d got a foreign message %s", s, i, raw)
					}
					progress.Add(1)
				}
				m := r.final(t)
				if string(m.ID) != id || toolText(t, m) != want {
					crossed.Add(1)
					t.Errorf("session %d call %d: got id %s text %q", s, i, m.ID, toolText(t, m))
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d calls, %d progress notifications, %d crossed, %d lost", sessions*calls, progress.Load(), crossed.Load(), lost.Load())
	if crossed.Load() != 0 || lost.Load() != 0 {
		t.Fatalf("crossed %d, lost %d", crossed.Load(), lost.Load())
	}
	if want := int64(sessions * calls * 3); progress.Load() != want {
		t.Fatalf("got %d progress notifications, want %d", progress.Load(), want)
	}
}

// TestCrashFailsPendingAndRestarts kills the child mid-call: the pending
// call fails at once, and the next call succeeds on the restarted process.
func TestCrashFailsPendingAndRestarts(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)

	slow := make(chan rpc, 1)
	go func() {
		r := c.post(t, callBody("1", "slow", map[string]int{"ms": 600000}, ""))
		slow <- r.final(t)
	}()
	testkit.WaitFor(t, "the slow call to be in flight", func() bool { return g.pending("fake") == 1 })
	start := time.Now()
	crash := c.post(t, callBody("2", "crash", map[string]any{}, "")).final(t)
	for _, m := range []rpc{crash, <-slow} {
		if m.Error == nil || m.Error.Code != -32000 {
			t.Fatalf("pending call after crash: got %+v, want error -32000", m)
		}
	}
	t.Logf("pending calls failed %v after the crash", time.Since(start))
	// While the process backs off before its restart, calls fail at once
	// with an error naming why; once it is back they succeed.
	testkit.WaitFor(t, "a call to succeed on the restarted process", func() bool {
		m := c.post(t, callBody("3", "echo", map[string]string{"message": "again"}, "")).final(t)
		if m.Error != nil {
			if m.Error.Code != -32000 || !strings.Contains(m.Error.Message, "exit status 3") {
				t.Fatalf("during the restart: got %+v, want error -32000 naming the exit", m)
			}
			return false
		}
		if got := toolText(t, m); got != "again" {
			t.Fatalf("after restart: got %q", got)
		}
		return true
	})
}

// TestNoChildOutlivesGateway: after sessions end and after shutdown, no
// child process (nor grandchild) remains, in both isolation modes.
func TestNoChildOutlivesGateway(t *testing.T) {
	marker := fmt.Sprintf("leak-%d", time.Now().UnixNano())
	opts := testkit.FakeOptions{Marker: marker, SpawnGrandchild: true}
	shared := fakeServer("shared", opts)
	isolated := fakeServer("isolated", opts)
	isolated.Isolation = config.IsolationSession
	isolated.Prewarm = 2
	g := startGateway(t, newConfig(shared, isolated))

	var kept []*mcpClient
	for i := range 6 {
		c := g.client([]string{"shared", "isolated"}[i%2])
		c.connect(t)
		if got := toolText(t, c.post(t, callBody("1", "echo", map[string]string{"message": "hi"}, "")).final(t)); got != "hi" {
			t.Fatalf("echo: %q", got)
		}
		kept = append(kept, c)
	}
	// End half the isolated sessions: their processes (and grandchildren) go.
	before := len(testkit.Procs(marker))
	for _, c := range []*mcpClient{kept[1], kept[3]} {
		if r := c.do(t, c.request(http.MethodDelete, ""), nil); r.Status != http.StatusNoContent {
			t.Fatalf("DELETE: status %d", r.Status)
		}
	}
	// A session's process is stopped in the background (DELETE does not
	// wait out its grace periods), so wait for it to go.
	testkit.WaitFor(t, fmt.Sprintf("deleted sessions' processes to go (%d before)", before), func() bool {
		return len(testkit.Procs(marker)) < before
	})
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if left := testkit.WaitProcsGone(marker, 10*time.Second); len(left) != 0 {
		t.Fatalf("processes left after shutdown: %+v", left)
	}
}

// TestHandlerConfig: every gateway key reaches the HTTP front, and
// "sseReplayEvents": 0 disables replay instead of meaning the default.
func TestHandlerConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Gateway.SSEReplayEvents = 0
	cfg.Gateway.SSEReplayBytes, cfg.Gateway.SessionReplayBytes = 100, 200
	cfg.Gateway.BodyReadTimeout = 7 * time.Second
	hc := handlerConfig(cfg, nil, testLogger(t))
	if hc.ReplayEvents >= 0 {
		t.Errorf("sseReplayEvents 0 gives front ReplayEvents %d, want negative (keep none)", hc.ReplayEvents)
	}
	if hc.ReplayBytes != 100 || hc.SessionReplayBytes != 200 || hc.BodyReadTimeout != 7*time.Second {
		t.Errorf("front config %+v does not carry the gateway's replay bytes and body timeout", hc)
	}
	if hc.HostAllowed == nil || hc.HostAllowed("evil.example") || !hc.HostAllowed("localhost") {
		t.Error("a loopback listener must get a Host check that refuses foreign names")
	}
	cfg.Gateway.SSEReplayEvents = 512
	if hc := handlerConfig(cfg, nil, testLogger(t)); hc.ReplayEvents != 512 {
		t.Errorf("sseReplayEvents 512 gives %d", hc.ReplayEvents)
	}
}
