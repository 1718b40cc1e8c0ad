package mux

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestRateLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	r := rateLimit{now: func() time.Time { return now }}
	if ok, n := r.allow(); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for range 99 {
		if ok, _ := r.allow(); ok {
			t.Fatal("allowed within the interval")
		}
	}
	now = now.Add(warnEvery)
	if ok, n := r.allow(); !ok || n != 99 {
		t.Fatalf("after the interval: %v, %d suppressed, want 99", ok, n)
	}
}

// countHandler counts log records by message.
type countHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// TestFloodsLogRateLimited: a flood of garbage lines, unknown replies and
// unroutable server requests logs a line or two per kind, not one per
// message, while every one is still counted.
func TestFloodsLogRateLimited(t *testing.T) {
	h := &countHandler{n: map[string]int{}}
	m, _ := startShared(t, Options{Logger: slog.New(h)})
	const flood = 1000
	for range flood {
		m.Line(1, []byte(`not json`))
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":424242,"result":{}}`))
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{}}`))
	}
	st := m.Stats()
	if st.Garbage != flood || st.UnknownReplies != flood || st.Unroutable != flood {
		t.Fatalf("counts %+v", st)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.n, "server ready") // the start's own line
	if len(h.n) != 3 {
		t.Fatalf("log lines %v", h.n)
	}
	for msg, n := range h.n {
		if n > 3 { // one per second, and the test takes well under that
			t.Errorf("%d lines of %q for a flood of %d", n, msg, flood)
		}
	}
}

// TestTimeoutFloodLogRateLimited: many requests timing out together (a
// server that hangs under 500 sessions' calls) log a line or two, with the
// count held back, not one WARN line per request: against the binary, 600
// requests to a server that stopped reading logged 600 lines. Every one is
// still answered and counted.
func TestTimeoutFloodLogRateLimited(t *testing.T) {
	h := &countHandler{n: map[string]int{}}
	m := New(Options{Name: "t", Timeout: 50 * time.Millisecond, Logger: slog.New(h)})
	defer m.Close()
	m.SetUpstream(testkit.Genless(&silent{m: m}))
	m.Started(1)
	const flood = 300
	out := &collect{done: make(chan struct{}, flood)}
	c := m.Join(out)
	for i := range flood {
		msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{}}`))
		c.Handle(context.Background(), &msg, out)
	}
	deadline := time.After(10 * time.Second)
	for range flood {
		select {
		case <-out.done:
		case <-deadline:
			t.Fatalf("%d of %d requests answered", len(out.replies), flood)
		}
	}
	if n := m.Stats().TimedOut; n != flood {
		t.Fatalf("timed out %d, want %d", n, flood)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.n["request timed out"]; n < 1 || n > 3 {
		t.Fatalf("%d lines of \"request timed out\" for %d timeouts", n, flood)
	}
}
