package upstream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// countHandler is a slog.Handler that counts what would be logged.
type countHandler struct {
	mu          *sync.Mutex
	stderrBytes *int // guarded by mu: bytes of stderr lines logged
	summaries   *[]string
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
	eventually(t, "a summary line and a flood", func() bool {
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
