package stdio

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// countHandler is a slog.Handler that counts what would be logged.
type countHandler struct {
	mu          *sync.Mutex
	stderrBytes *int // guarded by mu: bytes of stderr lines logged
	summaries   *[]string
	records     *int // guarded by mu: stderr lines logged; may be nil
	attrs       []slog.Attr
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) WithGroup(string) slog.Handler            { return h }
func (h countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	stream := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "stream" {
			stream = a.Value.String()
		}
		return true
	})
	if stream != "stderr" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.HasPrefix(r.Message, "stderr: ") && strings.HasSuffix(r.Message, " lines not logged") {
		*h.summaries = append(*h.summaries, r.Message)
	} else {
		*h.stderrBytes += len(r.Message)
		if h.records != nil {
			*h.records++
		}
	}
	return nil
}

// A child flooding stderr gets at most StderrBytesPerSec bytes logged per
// second; the rest is read (the child never blocks), counted and summarised.
func TestStderrFloodBounded(t *testing.T) {
	var (
		mu        sync.Mutex
		logged    int
		summaries []string
	)
	cfg := shConfig(t, "yes aaaaaaaa >&2")
	cfg.StderrBytesPerSec = 2000
	cfg.StopGrace = 50 * time.Millisecond
	cfg.Logger = slog.New(countHandler{mu: &mu, stderrBytes: &logged, summaries: &summaries})
	begin := time.Now()
	s, _ := start(t, cfg)
	testkit.WaitFor(t, "a summary line and a flood", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(summaries) > 0 && s.Stats().StderrDroppedBytes > 1<<20
	})
	s.Close()
	elapsed := time.Since(begin)
	mu.Lock()
	defer mu.Unlock()
	// One budget per started second, plus the window open at the start.
	bound := cfg.StderrBytesPerSec * (int(elapsed/time.Second) + 2)
	st := s.Stats()
	if logged == 0 || logged > bound {
		t.Fatalf("logged %d stderr bytes in %v, bound %d", logged, elapsed, bound)
	}
	if st.StderrDroppedLines == 0 || len(summaries) > int(elapsed/time.Second)+2 {
		t.Fatalf("stats %+v, %d summaries in %v", st, len(summaries), elapsed)
	}
	t.Logf("%v: logged %d bytes, dropped %d bytes in %d lines; %q", elapsed, logged,
		st.StderrDroppedBytes, st.StderrDroppedLines, summaries[0])
}

// A flood of one-byte stderr lines is bounded too: each logged line costs
// its log record's overhead, not just its text, or a budget of 2000 bytes
// would let 2000 records a second through.
func TestStderrTinyLinesBounded(t *testing.T) {
	var (
		mu              sync.Mutex
		logged, records int
		summaries       []string
	)
	cfg := shConfig(t, "yes a >&2")
	cfg.StderrBytesPerSec = 2000
	cfg.Logger = slog.New(countHandler{mu: &mu, stderrBytes: &logged, summaries: &summaries, records: &records})
	begin := time.Now()
	s, _ := start(t, cfg)
	testkit.WaitFor(t, "a summary line and a flood", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(summaries) > 0 && s.Stats().StderrDroppedLines > 100_000
	})
	s.Close()
	elapsed := time.Since(begin)
	mu.Lock()
	defer mu.Unlock()
	bound := cfg.StderrBytesPerSec / stderrLineCost * (int(elapsed/time.Second) + 2)
	if records == 0 || records > bound {
		t.Fatalf("logged %d stderr records in %v, bound %d", records, elapsed, bound)
	}
}

// A budget smaller than one line's cost still logs a line a second rather
// than nothing at all (the configuration accepts any budget from 1).
func TestStderrTinyBudgetLogsSomething(t *testing.T) {
	var (
		mu              sync.Mutex
		logged, records int
		summaries       []string
	)
	cfg := shConfig(t, "yes a >&2")
	cfg.StderrBytesPerSec = 1
	cfg.Logger = slog.New(countHandler{mu: &mu, stderrBytes: &logged, summaries: &summaries, records: &records})
	start(t, cfg)
	testkit.WaitFor(t, "a stderr line logged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return records > 0
	})
}
