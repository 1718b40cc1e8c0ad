package main

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// logVia makes the stubbed gateway write one info line with the logger
// serve gave it, so the test sees the format on stderr.
func logVia(t *testing.T) *gatewayCall {
	t.Helper()
	call := stubGateway(t, nil)
	stub := runGateway
	runGateway = func(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
		log.Info("server ready", "server", "memory", "startup", 1234*time.Millisecond)
		return stub(ctx, cfg, log)
	}
	return call
}

// jsonLines parses every line of out as a JSON object.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		t.Fatalf("no log lines in %q", out)
	}
	return recs
}

func TestServeLogFormatJSON(t *testing.T) {
	logVia(t)
	r := runCLI("serve", "--log-format", "json", "--", "cat")
	if r.code != exitOK {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	rec := jsonLines(t, r.stderr)[0]
	if rec["level"] != "INFO" || rec["msg"] != "server ready" || rec["server"] != "memory" || rec["startup"] != "1.234s" {
		t.Errorf("record %v", rec)
	}
}

func TestServeLogFormatConfig(t *testing.T) {
	file := writeFile(t, "c.json", `{"mcpServers": {"m": {"command": "x"}}, "gateway": {"logFormat": "json"}}`)
	tests := []struct {
		name     string
		args     []string
		wantJSON bool
	}{
		{"default", []string{"--", "cat"}, false},
		{"config", []string{"--config", file}, true},
		{"flag wins", []string{"--config", file, "--log-format", "text"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := logVia(t)
			r := runCLI(append([]string{"serve"}, tt.args...)...)
			if r.code != exitOK || call.calls != 1 {
				t.Fatalf("code %d, %d calls, stderr %q", r.code, call.calls, r.stderr)
			}
			if tt.wantJSON {
				jsonLines(t, r.stderr)
				return
			}
			if !strings.HasPrefix(r.stderr, "time=") || !strings.Contains(r.stderr, `level=INFO msg="server ready" server=memory startup=1.234s`) {
				t.Errorf("not a text line: %q", r.stderr)
			}
		})
	}
}

func TestServeLogFormatErrors(t *testing.T) {
	call := stubGateway(t, nil)
	r := runCLI("serve", "--log-format", "logfmt", "--", "cat")
	if r.code != exitUsage || !strings.Contains(r.stderr, `--log-format: log format "logfmt" is not one of text, json`) ||
		!strings.Contains(r.stderr, "usage:") {
		t.Errorf("bad flag: code %d, stderr %q", r.code, r.stderr)
	}
	file := writeFile(t, "c.json", `{"mcpServers": {"m": {"command": "x"}}, "gateway": {"logFormat": "JSON"}}`)
	r = runCLI("serve", "--config", file)
	if want := file + `: gateway.logFormat: "JSON" is not one of "text", "json"`; r.code != exitFailure || !strings.Contains(r.stderr, want) {
		t.Errorf("bad config: code %d, stderr %q, want %q", r.code, r.stderr, want)
	}
	if call.calls != 0 {
		t.Errorf("the gateway ran %d times", call.calls)
	}
	r = runCLI("serve", "--help")
	if !strings.Contains(r.stdout, "--log-format FORMAT") || !strings.Contains(r.stdout, "[--log-format FORMAT]") {
		t.Errorf("help lacks --log-format:\n%s", r.stdout)
	}
}
