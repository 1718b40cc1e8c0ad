package stdio

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestStderrLevel(t *testing.T) {
	const def = slog.Level(2) // between info and warn: "named none"
	tests := []struct {
		line string
		want slog.Level
	}{
		{`{"level":"error","msg":"boom"}`, slog.LevelError},
		{` {"time":"x","level":"WARN","msg":"m"} `, slog.LevelWarn},
		{`{"lvl":"dbug","severity":"info"}`, slog.LevelInfo},
		{`{"level":50,"msg":"pino"}`, slog.LevelError},
		{`{"level":30}`, slog.LevelInfo},
		{`{"level":20}`, slog.LevelDebug},
		{`{"level":"loud","msg":"error: no"}`, def},
		{`{"msg":"no level"}`, def},
		{`{"level":"error"`, def}, // not JSON, and no word at the start
		{`time=2024-05-01T10:00:00Z level=warn msg="disk"`, slog.LevelWarn},
		{`t=1 level="error" msg=x`, slog.LevelError},
		{`ts=1 lvl=debug msg=x`, slog.LevelDebug},
		{`loglevel=error is a setting`, def},
		{`ERROR: bad token`, slog.LevelError},
		{`error: bad token`, slog.LevelError},
		{`Error: Cannot find module 'x'`, slog.LevelError},
		{`WARNING:root:disk almost full`, slog.LevelWarn},
		{`Warning: deprecated`, slog.LevelWarn},
		{`INFO:     Uvicorn running`, slog.LevelInfo},
		{`DEBUG cache hit`, slog.LevelDebug},
		{`[2024-05-01T10:00:00Z ERROR srv] failed`, slog.LevelError},
		{`[warn] slow`, slog.LevelWarn},
		{`12:00:00 [debug] tick`, slog.LevelDebug},
		{`<error> x`, slog.LevelError},
		{`2024/05/01 10:00:00 WARN low memory`, slog.LevelWarn},
		{`2024-05-01 10:00:00,123 - mcp.server - ERROR - failed`, slog.LevelError},
		{`2024-05-01 10:00:00 FATAL out`, slog.LevelError},
		{`CRITICAL:app:down`, slog.LevelError},
		{`panic: runtime error: index out of range`, slog.LevelError},
		{`Server started on stdio`, def},
		{`Secure MCP Filesystem Server running on stdio`, def},
		{`no error here`, def},                         // lower case, not first, not bracketed
		{`Loading information`, def},                   // "Loading" is the first word
		{`Debugging enabled`, def},                     // not a level word
		{strings.Repeat("x ", 45) + "ERROR late", def}, // beyond the window
		{"", def},
		{"\xff\xfeERR\x00", slog.LevelError},
	}
	for _, tt := range tests {
		if got := stderrLevel([]byte(tt.line), def); got != tt.want {
			t.Errorf("stderrLevel(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

func FuzzStderrLevel(f *testing.F) {
	for _, s := range []string{`{"level":"error"}`, `level=warn`, `ERROR: x`, `[info]`, `{"level":99}`, "INFORMATIONAL"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		const def = slog.Level(1)
		switch l := stderrLevel(line, def); l {
		case def, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
		default:
			t.Fatalf("stderrLevel(%q) = %v", line, l)
		}
	})
}

// atLeast passes on the records at or above min, as a handler at that
// level would.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }
func (h atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(as), h.min}
}

// stderrRecords starts a fake writing lines to stderr at startup, logging
// to a handler at info, and returns the level of each stderr line logged
// up to and including the line until.
func stderrRecords(t *testing.T, lines []string, until string, tweak func(*StdioConfig)) map[string]slog.Level {
	t.Helper()
	logs := make(chan slog.Record, 100)
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true, Stderr: strings.Join(lines, "\n")})
	cfg.Logger = slog.New(atLeast{recordHandler{ch: logs}, slog.LevelInfo})
	tweak(&cfg)
	s, _ := start(t, cfg)
	pid := fmt.Sprint(s.PID())
	got := map[string]slog.Level{}
	deadline := time.After(failAfter)
	for {
		select {
		case r := <-logs:
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			if attrs["stream"] != "stderr" || strings.HasPrefix(r.Message, "stderr: ") {
				continue
			}
			if attrs["server"] != t.Name() || attrs["pid"] != pid {
				t.Errorf("line %q logged with %v", r.Message, attrs)
			}
			got[r.Message] = r.Level
			if r.Message == until {
				return got
			}
		case <-deadline:
			t.Fatalf("line %q not logged; got %v", until, got)
		}
	}
}

// Each stderr line is logged, as the message, at the level it names; the
// others at StderrLevel; a line below the logger's level is not logged.
func TestStderrLinesAtTheirLevels(t *testing.T) {
	got := stderrRecords(t, []string{
		"ERROR: bad token",
		`{"level":"warn","msg":"slow"}`,
		"[debug] not shown",
		"level=info msg=listening",
		"plain line",
	}, "plain line", func(cfg *StdioConfig) { cfg.StderrLevel = slog.LevelWarn })
	want := map[string]slog.Level{
		"ERROR: bad token":              slog.LevelError,
		`{"level":"warn","msg":"slow"}`: slog.LevelWarn,
		"level=info msg=listening":      slog.LevelInfo,
		"plain line":                    slog.LevelWarn,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("logged %v, want %v", got, want)
	}
}

// A line below the logger's level costs nothing of the stderr budget: with
// room for one line a second, debug chatter does not hide the error after
// it.
func TestStderrBelowLevelFree(t *testing.T) {
	got := stderrRecords(t, []string{"[debug] a", "DEBUG b", "ERROR: shown"}, "ERROR: shown",
		func(cfg *StdioConfig) { cfg.StderrBytesPerSec = 1 })
	if len(got) != 1 || got["ERROR: shown"] != slog.LevelError {
		t.Errorf("logged %v", got)
	}
}
