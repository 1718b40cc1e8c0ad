package stdio

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// capture is a slog.Handler that keeps every record's level and message.
type capture struct {
	mu      sync.Mutex
	records []slog.Record // guarded by mu
}

func (h *capture) Enabled(context.Context, slog.Level) bool { return true }
func (h *capture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *capture) WithGroup(string) slog.Handler            { return h }
func (h *capture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}

// levels returns the levels of the records with message msg.
func (h *capture) levels(msg string) []slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Level
	for _, r := range h.records {
		if r.Message == msg {
			out = append(out, r.Level)
		}
	}
	return out
}

// A server that runs on after stdin EOF and stops on SIGTERM is stopped
// the routine way: logged at Info, not Warn.
func TestStopWithSIGTERMIsInfo(t *testing.T) {
	logs := &capture{}
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true, IgnoreStdinEOF: true})
	cfg.StopGrace = 50 * time.Millisecond
	cfg.Logger = slog.New(logs)
	s, r := start(t, cfg)
	if err := s.Send(context.Background(), []byte("ready?")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("ready?")
	s.Close()
	got := logs.levels("upstream did not exit after stdin closed; sending SIGTERM")
	if len(got) != 1 || got[0] != slog.LevelInfo {
		t.Fatalf("SIGTERM lines at %v, want one at INFO", got)
	}
	if n := len(logs.levels("upstream ignored SIGTERM; sending SIGKILL")); n != 0 {
		t.Fatalf("SIGKILL logged %d times for a server that obeyed SIGTERM", n)
	}
}

// An unexpected exit is for the Handler to log (it gets the ExitError and
// knows what failed with it): the Stdio adds no second warning.
func TestExitNotWarnedTwice(t *testing.T) {
	logs := &capture{}
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Logger = slog.New(logs)
	s, r := start(t, cfg)
	if err := s.Send(context.Background(), []byte("!crash")); err != nil {
		t.Fatal(err)
	}
	if ex := r.waitEvent("exited", 1); ex.err == nil {
		t.Fatal("crash reported as a clean stop")
	}
	for _, l := range logs.levels("upstream exited") {
		if l >= slog.LevelWarn {
			t.Fatalf("the Stdio logged the exit at %v", l)
		}
	}
}
