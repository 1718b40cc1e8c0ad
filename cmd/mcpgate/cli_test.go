package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestMain lets the test binary run as a fake MCP server (testkit.Command)
// for the tests that start the real gateway.
func TestMain(m *testing.M) {
	testkit.Main()
	os.Exit(m.Run())
}

// result is what one run of the command line did.
type result struct {
	code           int
	stdout, stderr string
}

func runCLI(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// gatewayCall records what serve handed to the gateway.
type gatewayCall struct {
	calls  int
	cfg    *config.Config
	log    *slog.Logger
	ctxErr error // ctx.Err() when called
}

// stubGateway replaces runGateway for the test; it returns err.
func stubGateway(t *testing.T, err error) *gatewayCall {
	t.Helper()
	c := &gatewayCall{}
	old := runGateway
	t.Cleanup(func() { runGateway = old })
	runGateway = func(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
		c.calls++
		c.cfg, c.log, c.ctxErr = cfg, log, ctx.Err()
		return err
	}
	return c
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHelp(t *testing.T) {
	top := []string{"mcpgate serve --config FILE", "-- COMMAND [ARGS...]", "mcpgate validate --config FILE", "mcpgate version"}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, top},
		{[]string{"-h"}, top},
		{[]string{"help"}, top},
		{[]string{"serve", "--help"}, []string{"usage: mcpgate serve --config FILE", "--config FILE", "--listen ADDR", "--log-level LEVEL", "SIGTERM"}},
		{[]string{"serve", "-h"}, []string{"--config FILE", "--listen ADDR", "--log-level LEVEL"}},
		{[]string{"help", "serve"}, []string{"--config FILE", "--listen ADDR", "--log-level LEVEL"}},
		{[]string{"validate", "--help"}, []string{"usage: mcpgate validate --config FILE", "--config FILE", "ok (N servers)"}},
		{[]string{"version", "-h"}, []string{"usage: mcpgate version", "Go version"}},
	}
	for _, tt := range tests {
		r := runCLI(tt.args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%q: code %d, stderr %q; want 0 and nothing", tt.args, r.code, r.stderr)
		}
		for _, want := range tt.want {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q: help lacks %q:\n%s", tt.args, want, r.stdout)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	stubGateway(t, errors.New("must not run"))
	file := writeFile(t, "c.json", `{"mcpServers": {"a": {"command": "x"}}}`)
	tests := []struct {
		args []string
		want string // in stderr
	}{
		{nil, "Usage:"},
		{[]string{"start"}, `unknown command "start"`},
		{[]string{"serve"}, "need --config FILE or -- COMMAND [ARGS...]"},
		{[]string{"serve", "--config", file, "--", "cat"}, "use --config FILE or -- COMMAND, not both"},
		{[]string{"serve", "--"}, "missing COMMAND after --"},
		{[]string{"serve", "cat"}, `unexpected argument "cat" (put a server's command after --)`},
		{[]string{"serve", "--config", file, "extra"}, `unexpected argument "extra"`},
		{[]string{"serve", "--bogus", "--", "cat"}, "flag provided but not defined: -bogus"},
		{[]string{"serve", "--config"}, "flag needs an argument: -config"},
		{[]string{"serve", "--log-level", "loud", "--", "cat"}, `--log-level: log level "loud" is not one of debug, info, warn, error`},
		{[]string{"serve", "--listen", "8080", "--", "cat"}, `--listen: "8080" is not host:port`},
		{[]string{"validate"}, "--config FILE is required"},
		{[]string{"validate", "--config", file, "other.json"}, `unexpected argument "other.json"`},
		{[]string{"validate", "-x"}, "flag provided but not defined: -x"},
		{[]string{"version", "now"}, `unexpected argument "now"`},
	}
	for _, tt := range tests {
		r := runCLI(tt.args...)
		if r.code != 2 || r.stdout != "" {
			t.Errorf("%q: code %d, stdout %q; want 2 and nothing", tt.args, r.code, r.stdout)
		}
		if !strings.Contains(r.stderr, tt.want) || !strings.Contains(strings.ToLower(r.stderr), "usage") {
			t.Errorf("%q: stderr lacks %q or the usage:\n%s", tt.args, tt.want, r.stderr)
		}
	}
}

func TestValidate(t *testing.T) {
	good := writeFile(t, "good.json", `{"globalShortcut": "", "mcpServers": {
		"a": {"command": "x"}, "b": {"command": "y", "isolation": "session"}}}`)
	one := writeFile(t, "one.json", `{"mcpServers": {"a": {"command": "x"}}}`)
	bad := writeFile(t, "bad.json", `{
	  "mcpServers": {"memory": {"comand": "npx"}, "gh": {"command": "gh", "env": {"T": "${MCPGATE_TEST_UNSET_VAR}"}}},
	  "gateway": {"drainTimeout": "10"}
	}`)
	badPolicy := writeFile(t, "policy.json", `{"mcpServers": {"a": {"command": "x", "policy": {"rules": [{"when": "principal.name =="}, {"when": "1 + 1"}]}}}}`)
	missing := filepath.Join(t.TempDir(), "missing.json")
	tests := []struct {
		name         string
		file         string
		code         int
		stdout       string
		stderrHasArg bool
	}{
		{"good", good, 0, good + ": ok (2 servers)\n", false},
		{"one server", one, 0, one + ": ok (1 server)\n", false},
		{"quickstart", "../../examples/quickstart.json", 0, "../../examples/quickstart.json: ok (2 servers)\n", false},
		{"full", "../../examples/full.json", 0, "../../examples/full.json: ok (2 servers)\n", false},
		{"bad", bad, 1, strings.Join([]string{
			bad + `: gateway.drainTimeout: "10" is not a duration (use e.g. "10s")`,
			bad + `: mcpServers.gh.env.T: environment variable "MCPGATE_TEST_UNSET_VAR" is not set`,
			bad + `: mcpServers.memory.comand: unknown key`,
			bad + `: mcpServers.memory.command: required`,
		}, "\n") + "\n", false},
		{"bad policy", badPolicy, 1, badPolicy + `: mcpServers.a.policy.rules[0].when: 1:18: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}` + "\n" +
			badPolicy + ": mcpServers.a.policy.rules[1].when: must be a boolean expression, not one of type int\n", false},
		{"auth example", "../../examples/auth.json", 0, "../../examples/auth.json: ok (3 servers)\n", false},
		{"missing", missing, 1, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI("validate", "--config", tt.file)
			if r.code != tt.code || r.stdout != tt.stdout {
				t.Errorf("code %d, stdout:\n%s\nwant %d:\n%s", r.code, r.stdout, tt.code, tt.stdout)
			}
			if tt.stderrHasArg && !strings.Contains(r.stderr, tt.file) {
				t.Errorf("stderr = %q", r.stderr)
			}
			// Commands missing on this machine are warnings, nothing else.
			for line := range strings.Lines(r.stderr) {
				if !tt.stderrHasArg && !strings.Contains(line, ": warning: ") {
					t.Errorf("stderr line %q", line)
				}
			}
		})
	}
}

// TestValidateWarnsAboutCommands: a command that is not on PATH or cannot
// be run is a warning naming the server, not a failure, since serve
// serves such a server with errors (or refuses to start if it is critical).
func TestValidateWarnsAboutCommands(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	file := writeFile(t, "c.json", `{"mcpServers": {
		"missing": {"command": "mcpgate-test-no-such-command"},
		"noexec": {"command": "`+notExec+`"},
		"fine": {"command": "`+sh+`"},
		"shfine": {"command": "sh"},
		"remote": {"url": "http://127.0.0.1:1/mcp"},
		"nocwd": {"command": "sh", "cwd": "`+filepath.Join(dir, "nodir")+`"}
	}}`)
	r := runCLI("validate", "--config", file)
	if r.code != 0 || r.stdout != file+": ok (6 servers)\n" {
		t.Errorf("code %d, stdout %q: missing commands must not fail validate", r.code, r.stdout)
	}
	want := file + `: warning: mcpServers.missing.command: command not found: mcpgate-test-no-such-command (serve will answer its clients with this error)` + "\n" +
		file + `: warning: mcpServers.nocwd.cwd: working directory ` + filepath.Join(dir, "nodir") + ` is not a directory (serve will answer its clients with this error)` + "\n" +
		file + `: warning: mcpServers.noexec.command: cannot run ` + notExec + `: permission denied (serve will answer its clients with this error)` + "\n"
	if r.stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, want)
	}

	// A critical server that cannot run fails validate, as it fails serve.
	crit := writeFile(t, "crit.json", `{"mcpServers": {
		"crit": {"command": "mcpgate-test-no-such-command-2", "critical": true},
		"fine": {"command": "sh"}
	}}`)
	r = runCLI("validate", "--config", crit)
	wantOut := crit + `: mcpServers.crit.command: command not found: mcpgate-test-no-such-command-2 (the server is critical: serve will not start)` + "\n"
	if r.code != 1 || r.stdout != wantOut {
		t.Errorf("critical: code %d, stdout %q, want 1 and %q", r.code, r.stdout, wantOut)
	}
}

// TestValidateListenAddress: a listen address that cannot be listened on
// fails validate, naming the key.
func TestValidateListenAddress(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:99999", "nohost", "127.0.0.1:http"} {
		file := writeFile(t, "l.json", `{"mcpServers": {"a": {"command": "sh"}}, "gateway": {"listen": "`+listen+`"}}`)
		r := runCLI("validate", "--config", file)
		if r.code != 1 || !strings.HasPrefix(r.stdout, file+": gateway.listen: ") {
			t.Errorf("listen %q: code %d, stdout %q", listen, r.code, r.stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	r := runCLI("version")
	want := "mcpgate " + versionString() + "\n" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("version: %+v, want stdout %q", r, want)
	}

	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3"
	if r := runCLI("--version"); !strings.HasPrefix(r.stdout, "mcpgate v1.2.3\n") {
		t.Errorf("--version with -X main.version: %q", r.stdout)
	}
}

func TestServeCommand(t *testing.T) {
	call := stubGateway(t, nil)
	r := runCLI("serve", "--listen", "127.0.0.1:0", "--log-level", "debug", "--", "cat", "-u", "--config", "x")
	if r.code != 0 || call.calls != 1 {
		t.Fatalf("code %d, %d gateway calls, stderr %q", r.code, call.calls, r.stderr)
	}
	want := config.Default()
	want.Gateway.Listen = "127.0.0.1:0"
	want.Gateway.LogLevel = "debug"
	s := want.Gateway.NewServer("default")
	s.Command, s.Args = "cat", []string{"-u", "--config", "x"} // after --, flags are the server's
	s.Critical = true
	want.Servers["default"] = s
	want.BareServer = "default" // also at /mcp
	if !reflect.DeepEqual(call.cfg, want) {
		t.Errorf("config =\n %+v %+v\nwant\n %+v %+v", call.cfg.Gateway, call.cfg.Servers["default"], want.Gateway, s)
	}
	if call.ctxErr != nil {
		t.Errorf("gateway got a done context: %v", call.ctxErr)
	}
	if !call.log.Enabled(context.Background(), slog.LevelDebug) {
		t.Error("--log-level debug: logger does not log debug")
	}
}

func TestServeCommandDefaults(t *testing.T) {
	call := stubGateway(t, nil)
	if r := runCLI("serve", "--", "npx", "-y", "@modelcontextprotocol/server-memory"); r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	if got := call.cfg.Gateway; !reflect.DeepEqual(got, config.Defaults()) {
		t.Errorf("gateway = %+v, want defaults", got)
	}
	if got := call.cfg.Names(); !reflect.DeepEqual(got, []string{"default"}) {
		t.Errorf("servers = %q", got)
	}
	if call.log.Enabled(context.Background(), slog.LevelDebug) || !call.log.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("default logger is not at info")
	}
}

func TestServeConfig(t *testing.T) {
	file := writeFile(t, "c.json", `{"mcpServers": {"m": {"command": "x", "args": ["1"]}},
		"gateway": {"listen": "0.0.0.0:9000", "logLevel": "warn"}}`)
	tests := []struct {
		name       string
		args       []string
		wantListen string
		wantLevel  string
	}{
		{"file", []string{"--config", file}, "0.0.0.0:9000", "warn"},
		{"flags override", []string{"--config", file, "--listen", "[::1]:7000", "--log-level", "error"}, "[::1]:7000", "error"},
		{"flags first", []string{"--listen", "localhost:1", "--config", file}, "localhost:1", "warn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := stubGateway(t, nil)
			r := runCLI(append([]string{"serve"}, tt.args...)...)
			if r.code != 0 || call.calls != 1 {
				t.Fatalf("code %d, %d calls, stderr %q", r.code, call.calls, r.stderr)
			}
			g := call.cfg.Gateway
			if g.Listen != tt.wantListen || g.LogLevel != tt.wantLevel {
				t.Errorf("listen %q level %q, want %q %q", g.Listen, g.LogLevel, tt.wantListen, tt.wantLevel)
			}
			if s := call.cfg.Servers["m"]; s == nil || s.Command != "x" || !reflect.DeepEqual(s.Args, []string{"1"}) {
				t.Errorf("server m = %+v", s)
			}
		})
	}
}

func TestServeStartsNothingOnProblems(t *testing.T) {
	call := stubGateway(t, nil)
	bad := writeFile(t, "bad.json", `{"mcpServers": {"a": {"comand": "x"}, "b": {"command": "y", "prewarm": 1}}}`)
	missing := filepath.Join(t.TempDir(), "nope.json")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"problems", []string{"--config", bad}, []string{
			bad + ": mcpServers.a.comand: unknown key",
			bad + ": mcpServers.a.command: required",
			bad + `: mcpServers.b.prewarm: only valid with "isolation": "session"`,
		}},
		{"missing file", []string{"--config", missing}, []string{"mcpgate: open " + missing}},
		{"empty command", []string{"--", ""}, []string{"mcpServers.default.command: required"}},
	}
	for _, tt := range tests {
		r := runCLI(append([]string{"serve"}, tt.args...)...)
		if r.code != 1 || r.stdout != "" {
			t.Errorf("%s: code %d, stdout %q; want 1 and nothing", tt.name, r.code, r.stdout)
		}
		for _, want := range tt.want {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", tt.name, want, r.stderr)
			}
		}
	}
	if call.calls != 0 {
		t.Errorf("the gateway ran %d times despite problems", call.calls)
	}
}

func TestServeGatewayError(t *testing.T) {
	call := stubGateway(t, errors.New("listen tcp 127.0.0.1:8080: bind: address already in use"))
	r := runCLI("serve", "--", "cat")
	if r.code != 1 || call.calls != 1 || !strings.Contains(r.stderr, "mcpgate: listen tcp 127.0.0.1:8080: bind: address already in use") {
		t.Errorf("code %d, calls %d, stderr %q", r.code, call.calls, r.stderr)
	}
}

// TestServeRefusesMissingCriticalCommand: serve exits 1 at startup, naming
// the server and the cause, when a critical server's command is missing.
func TestServeRefusesMissingCriticalCommand(t *testing.T) {
	file := writeFile(t, "c.json", `{"mcpServers": {
		"ok": {"command": "sh"},
		"needed": {"command": "mcpgate-test-no-such-command", "critical": true}
	}, "gateway": {"listen": "127.0.0.1:0"}}`)
	r := runCLI("serve", "--config", file)
	want := `critical server "needed" cannot start: command not found: mcpgate-test-no-such-command`
	if r.code != exitFailure || !strings.Contains(r.stderr, want) {
		t.Errorf("serve: code %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
	}
}

// A second SIGTERM during the drain ends the gateway at once, and first
// kills the process group of each server: a server's grandchild (npx -> sh
// -> node) survived when the gateway just died of the signal, since
// Pdeathsig reaches only the direct child.
func TestSecondSignalKillsServerGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcpgate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mk := fmt.Sprintf("mk-%d-%d-second-signal", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { // whatever the outcome, leave nothing running
		for _, pid := range testkit.Procs(mk) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// A server that outlives stdin EOF and SIGTERM keeps the drain going
	// (two StopGraces) while the second signal comes.
	cmd, args, env := testkit.Command(testkit.FakeOptions{
		IgnoreStdinEOF: true, IgnoreSIGTERM: true, SpawnGrandchild: true, Marker: mk,
	})
	envObj := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envObj[k] = v
	}
	cfg, err := json.Marshal(map[string]any{
		"gateway":    map[string]any{"listen": "127.0.0.1:0"},
		"mcpServers": map[string]any{"fake": map[string]any{"command": cmd, "args": args, "env": envObj}},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := exec.Command(bin, "serve", "--config", writeFile(t, "mcpgate.json", string(cfg)))
	stderr, err := gw.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	shuttingDown := make(chan struct{})
	var logs strings.Builder
	var logMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			logMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if strings.Contains(sc.Text(), "shutting down") {
				once.Do(func() { close(shuttingDown) })
			}
		}
		exited <- gw.Wait()
	}()
	defer func() {
		gw.Process.Kill()
		if t.Failed() {
			logMu.Lock()
			t.Logf("gateway log:\n%s", logs.String())
			logMu.Unlock()
		}
	}()

	testkit.WaitFor(t, "the server and its grandchild to run", func() bool { return len(testkit.Procs(mk)) == 2 })
	if err := gw.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-shuttingDown:
	case <-time.After(15 * time.Second):
		t.Fatal("the gateway never started draining")
	}
	// Repeated: one sent in the instant the first handler hands over to the
	// second could be absorbed by the first.
	begin := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.NewTimer(15 * time.Second)
	defer giveUp.Stop()
	var werr error
wait:
	for {
		gw.Process.Signal(syscall.SIGTERM)
		select {
		case werr = <-exited:
			break wait
		case <-tick.C:
		case <-giveUp.C:
			t.Fatal("the gateway did not exit on a second signal")
		}
	}
	// The drain would take two StopGraces (4 s) before its SIGKILL: only
	// an exit that waited for it takes that long.
	if took := time.Since(begin); took >= 4*time.Second {
		t.Errorf("exit took %v after the second signal", took)
	}
	var xe *exec.ExitError
	if !errors.As(werr, &xe) || xe.ExitCode() != exitFailure {
		t.Errorf("gateway exit: %v, want status %d", werr, exitFailure)
	}
	if left := testkit.WaitProcsGone(mk, 10*time.Second); len(left) > 0 {
		t.Fatalf("processes left after the gateway exited: %v", left)
	}
}
