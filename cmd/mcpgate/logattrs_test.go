package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// TestLogDurationsAsText: the gateway's logger writes a duration the same
// way in both formats, as docs/observability.md ("Logs") shows it
// ("startup=1.234s"), in groups too; other values are left alone.
func TestLogDurationsAsText(t *testing.T) {
	for _, format := range []string{config.LogFormatText, config.LogFormatJSON} {
		var buf bytes.Buffer
		log := newLogger(&buf, &config.Gateway{LogFormat: format})
		log.Info("server ready", "startup", 1234*time.Millisecond, "n", 3,
			"g", map[string]any{"x": 1}) // not a slog group: left to the handler
		log.WithGroup("drain").Info("shutting down", "timeout", 90*time.Second, "age", 62500*time.Millisecond)
		out := buf.String()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s: %d lines: %s", format, len(lines), out)
		}
		if format == config.LogFormatText {
			for _, want := range []string{"startup=1.234s", "n=3", "drain.timeout=1m30s", "drain.age=1m2.5s"} {
				if !strings.Contains(out, want) {
					t.Errorf("text: no %q in %s", want, out)
				}
			}
			continue
		}
		var first struct {
			Startup any `json:"startup"`
			N       any `json:"n"`
		}
		var second struct {
			Drain struct {
				Timeout any `json:"timeout"`
				Age     any `json:"age"`
			} `json:"drain"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
			t.Fatal(err)
		}
		if first.Startup != "1.234s" || first.N != float64(3) || second.Drain.Timeout != "1m30s" || second.Drain.Age != "1m2.5s" {
			t.Errorf("json: startup %#v, n %#v, drain.timeout %#v, drain.age %#v; want \"1.234s\", 3, \"1m30s\", \"1m2.5s\"\n%s",
				first.Startup, first.N, second.Drain.Timeout, second.Drain.Age, out)
		}
	}
}
