package remote

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait for something that should happen promptly;
// reaching it fails the test (it is never what makes a test pass).
const waitTimeout = 20 * time.Second

// event is one Handler call.
type event struct {
	kind string // started, line, oversized, exited
	gen  uint64
	data string // line: the message; oversized: the prefix
	size int
	err  error
}

func (e event) String() string {
	switch e.kind {
	case "line":
		return fmt.Sprintf("line(%d) %s", e.gen, e.data)
	case "oversized":
		return fmt.Sprintf("oversized(%d) %d bytes, prefix %.60q", e.gen, e.size, e.data)
	case "exited":
		return fmt.Sprintf("exited(%d) %v", e.gen, e.err)
	}
	return fmt.Sprintf("%s(%d)", e.kind, e.gen)
}

// recorder is a Handler that keeps every call and checks that calls never
// overlap.
type recorder struct {
	t      *testing.T
	inCall atomic.Int32

	mu      sync.Mutex
	events  []event
	changed chan struct{} // closed and replaced at every event
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, changed: make(chan struct{})}
}

func (r *recorder) add(e event) {
	if r.inCall.Add(1) != 1 {
		r.t.Errorf("overlapping Handler calls (at %v)", e)
	}
	defer r.inCall.Add(-1)
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) Started(gen uint64) { r.add(event{kind: "started", gen: gen}) }
func (r *recorder) Line(gen uint64, msg []byte) {
	r.add(event{kind: "line", gen: gen, data: string(msg)})
}
func (r *recorder) Exited(gen uint64, err error) { r.add(event{kind: "exited", gen: gen, err: err}) }
func (r *recorder) Oversized(gen uint64, p []byte, size int) {
	r.add(event{kind: "oversized", gen: gen, data: string(p), size: size})
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitFor waits until ok holds for the events so far, and returns them.
func (r *recorder) waitFor(what string, ok func([]event) bool) []event {
	r.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		evs, ch := append([]event(nil), r.events...), r.changed
		r.mu.Unlock()
		if ok(evs) {
			return evs
		}
		select {
		case <-ch:
		case <-deadline.C:
			r.t.Fatalf("timed out waiting for %s; events:\n%s", what, dump(evs))
		}
	}
}

// waitLine waits for a delivered message containing all of subs.
func (r *recorder) waitLine(subs ...string) string {
	r.t.Helper()
	var found string
	r.waitFor(fmt.Sprintf("a message with %q", subs), func(evs []event) bool {
		for _, e := range evs {
			if e.kind == "line" && containsAll(e.data, subs) {
				found = e.data
				return true
			}
		}
		return false
	})
	return found
}

// waitKind waits for an event of kind and generation gen.
func (r *recorder) waitKind(kind string, gen uint64) event {
	r.t.Helper()
	var found event
	r.waitFor(fmt.Sprintf("%s(%d)", kind, gen), func(evs []event) bool {
		for _, e := range evs {
			if e.kind == kind && e.gen == gen {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// lines returns the delivered messages containing all of subs.
func (r *recorder) lines(subs ...string) []string {
	var out []string
	for _, e := range r.snapshot() {
		if e.kind == "line" && containsAll(e.data, subs) {
			out = append(out, e.data)
		}
	}
	return out
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func dump(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %v\n", e)
	}
	return b.String()
}

// start starts a Client with a recorder and closes it at cleanup.
func start(t *testing.T, cfg Config) (*Client, *recorder) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	r := newRecorder(t)
	c, err := Start(cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, r
}

// send sends msg and fails the test on error.
func send(t *testing.T, c *Client, msg string) {
	t.Helper()
	if err := c.Send(context.Background(), []byte(msg)); err != nil {
		t.Fatalf("Send(%s): %v", msg, err)
	}
}

// testLogger logs to t at debug level (or discards with -short? no: always
// to t, which shows only for failing tests).
func testLogger(t *testing.T) *slog.Logger { return testkit.Logger(t, slog.LevelDebug) }

// requirePeers skips (or, under CI, fails) when a peer is not installed.
func requirePeers(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			msg := fmt.Sprintf("peer %s missing: run make peers", p)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// flushWrite writes s to w and flushes it.
func flushWrite(w io.Writer, s string) {
	io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

const (
	initReq = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	inited  = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// discardLogger drops everything (fuzzing would flood the test log).
var discardLogger = slog.New(slog.DiscardHandler)
