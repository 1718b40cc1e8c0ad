package config

import (
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	want := Gateway{
		Listen: "127.0.0.1:8080",
		AllowedOrigins: []string{
			"http://localhost", "http://127.0.0.1", "http://[::1]",
			"https://localhost", "https://127.0.0.1", "https://[::1]",
		},
		SessionIdleTimeout:   30 * time.Minute,
		SessionSweepInterval: 30 * time.Second,
		KeepAliveInterval:    15 * time.Second,
		DrainTimeout:         10 * time.Second,
		RequestTimeout:       5 * time.Minute,
		MaxSessions:          10000,
		MaxBodyBytes:         4194304,
		SSEReplayEvents:      512,
		MaxLineBytes:         16777216,
		LogLevel:             "info",
		LogFormat:            "text",
		SSEReplayBytes:       4 << 20,
		SessionReplayBytes:   16 << 20,
		HeaderTimeout:        10 * time.Second,
		BodyReadTimeout:      30 * time.Second,
		ReplyWait:            10 * time.Millisecond,
		InputWait:            2 * time.Minute,
		IdleTimeout:          2 * time.Minute,
		MaxConnections:       4096,
		AllowedHosts:         []string{},
		Metrics:              true,
	}
	if got := Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("Defaults() =\n %+v\nwant\n %+v", got, want)
	}
	// Each call returns its own slice: one config's edits must not leak.
	a := Defaults()
	a.AllowedOrigins[0] = "https://evil.example"
	if Defaults().AllowedOrigins[0] != "http://localhost" {
		t.Error("Defaults() shares AllowedOrigins between calls")
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := Default()
	if !reflect.DeepEqual(cfg.Gateway, Defaults()) || cfg.Servers == nil || len(cfg.Servers) != 0 {
		t.Fatalf("Default() = %+v", cfg)
	}
	// With no servers it is not yet valid; with one built by NewServer it is.
	var ps Problems
	if err := cfg.Validate(); !errors.As(err, &ps) || len(ps) != 1 || ps[0].Path != "mcpServers" {
		t.Errorf("Validate() of Default() = %v, want only mcpServers: no servers configured", err)
	}
	s := cfg.Gateway.NewServer("default")
	s.Command, s.Args = "cat", []string{"-u"}
	cfg.Servers[s.Name] = s
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate(): %v", err)
	}
}

func TestNewServerInherits(t *testing.T) {
	g := Defaults()
	g.RequestTimeout, g.MaxLineBytes = time.Second, 100
	want := &Server{Name: "n", Prefix: "n", Type: TypeStdio, Isolation: IsolationShared, Timeout: time.Second, MaxLineBytes: 100,
		InitTimeout: 120 * time.Second, StdinTimeout: 30 * time.Second, MaxProcesses: 64, Processes: 1, StderrBytesPerSec: 65536,
		StderrLevel: "info", Protocol: ProtocolAuto}
	if got := g.NewServer("n"); !reflect.DeepEqual(got, want) {
		t.Errorf("NewServer = %+v, want %+v", got, want)
	}
}

// TestProtocolSessionsUnderBothNames: "sessions" and its old name "legacy"
// parse to the same meaning (SessionsOnly); no other value has it.
func TestProtocolSessionsUnderBothNames(t *testing.T) {
	for _, tt := range []struct {
		protocol string
		want     bool
	}{{"sessions", true}, {"legacy", true}, {"auto", false}, {"2026-07-28", false}} {
		cfg, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x", "protocol": "`+tt.protocol+`"}}}`), nil)
		if err != nil {
			t.Fatalf("Parse with protocol %q: %v", tt.protocol, err)
		}
		if got := cfg.Servers["a"].SessionsOnly(); got != tt.want {
			t.Errorf("protocol %q: SessionsOnly() = %v, want %v", tt.protocol, got, tt.want)
		}
	}
	if (&Server{}).SessionsOnly() {
		t.Errorf("SessionsOnly() of an unset protocol (auto) = true")
	}
}

func TestNames(t *testing.T) {
	cfg := &Config{Servers: map[string]*Server{"b": nil, "a.1": nil, "A": nil, "a": nil}}
	if got, want := cfg.Names(), []string{"A", "a", "a.1", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
}

func TestValidateBuiltConfig(t *testing.T) {
	cfg := Default()
	cfg.Gateway.Listen = "nope"
	cfg.Servers["x"] = &Server{Name: "y", Command: "c"} // every default left at zero
	cfg.Servers["nil"] = nil
	err := cfg.Validate()
	want := strings.Join([]string{
		`gateway.listen: "nope" is not host:port (e.g. "127.0.0.1:8080")`,
		`mcpServers.nil: missing`,
		`mcpServers.x: server Name "y" differs from its key`,
		`mcpServers.x.initTimeout: must be greater than 0, not "0s"`,
		`mcpServers.x.isolation: "" is not one of "shared", "session"`,
		`mcpServers.x.maxLineBytes: must be at least 1, not 0`,
		`mcpServers.x.maxProcesses: must be at least 1, not 0`,
		`mcpServers.x.protocol: "" is not one of "auto", "2026-07-28", "sessions" (or its old name "legacy")`,
		`mcpServers.x.stderrBytesPerSec: must be at least 1, not 0`,
		`mcpServers.x.stderrLevel: "" is not one of "debug", "info", "warn", "error"`,
		`mcpServers.x.stdinTimeout: must be greater than 0, not "0s"`,
		`mcpServers.x.timeout: must be greater than 0, not "0s"`,
		`mcpServers.x.type: "" is not one of "stdio", "http", "sse"`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Validate() =\n%v\nwant\n%s", err, want)
	}
}

func TestProblemsError(t *testing.T) {
	ps := Problems{{"b", "second"}, {"", "whole file"}, {"a.x", "first"}, {"a.x", "first again"}}
	want := "whole file\na.x: first\na.x: first again\nb: second"
	if got := ps.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if ps[0].Path != "b" {
		t.Error("Error() reordered its receiver")
	}
}

func TestLogLevel(t *testing.T) {
	for s, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		got, err := ParseLogLevel(s)
		if err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", s, got, err, want)
		}
		g := Gateway{LogLevel: s}
		if g.Level() != want {
			t.Errorf("Level() for %q = %v", s, g.Level())
		}
	}
	for _, s := range []string{"", "INFO", "trace", "warning", "info+2"} {
		if _, err := ParseLogLevel(s); err == nil {
			t.Errorf("ParseLogLevel(%q) succeeded", s)
		}
	}
}

func TestCheckLogFormat(t *testing.T) {
	for _, s := range []string{"text", "json"} {
		if err := CheckLogFormat(s); err != nil {
			t.Errorf("CheckLogFormat(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "JSON", "logfmt", "text "} {
		if err := CheckLogFormat(s); err == nil {
			t.Errorf("CheckLogFormat(%q) succeeded", s)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Minute: "5m", 30 * time.Second: "30s", time.Hour: "1h",
		90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1.5s", 0: "0s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
