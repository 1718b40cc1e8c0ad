package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // config problems, or the gateway failed
	exitUsage   = 2
)

// command describes a subcommand for the help texts.
type command struct {
	name     string
	synopses []string // usage lines, without "mcpgate "
	summary  string   // one line, for `mcpgate --help`
	about    string   // paragraphs, for `mcpgate NAME --help`
}

var (
	serveCmd = command{
		name: "serve",
		synopses: []string{
			"serve --config FILE [--project PATH] [--watch=false] [--listen ADDR] [--log-level LEVEL] [--log-format FORMAT]",
			"serve [--listen ADDR] [--log-level LEVEL] [--log-format FORMAT] -- COMMAND [ARGS...]",
		},
		summary: "run the gateway",
		about: `Serve runs the gateway until it gets SIGINT or SIGTERM, then drains
in-flight requests and stops every server it started. A second signal
stops it at once.

With --config it serves the servers of that file, in the format of
whichever client wrote it, told apart by its content: Claude Desktop's
claude_desktop_config.json, Claude Code's .mcp.json, Cursor's
.cursor/mcp.json, Windsurf's mcp_config.json, Cline's and Roo's MCP
settings ("mcpServers"), VS Code's .vscode/mcp.json ("servers" and
"inputs"), or Claude Code's ~/.claude.json (with --project PATH, that
project's servers too). A server with "disabled": true is not started.
If the file has problems, serve reports them all and starts nothing.

With --config, SIGHUP reloads the file, and so does a change of it
(unless --watch=false): servers added are started, removed ones stopped,
changed ones restarted (their sessions end), unchanged ones keep running
with their sessions; API keys, issuers and policies apply to new
requests. A file with problems is refused (each logged) and the running
config stays. Gateway settings such as listen need a restart.

With -- COMMAND [ARGS...] and no config file it serves that one stdio
server, named "default", at /mcp and /servers/default/mcp, with default settings
(and "critical": true, since it is the only one).

A server that cannot start (its command is missing, or it keeps
crashing) does not stop the gateway: it is retried with backoff and its
clients get an error naming the cause. A server marked "critical": true
whose command cannot be found makes serve exit 1 before starting anything.

Logs go to stderr, as key=value text or (--log-format json) one JSON
object a line. Each line a server writes on its stderr becomes a record
with stream=stderr, server=NAME and pid, whose message is the line and
whose level is the one the line names ("ERROR ...", "[warn]",
"level=debug", a JSON "level" field), else info. Each server logs
"server ready" with its startup time; each client session (not the
stateless 2026-07-28 requests) logs "session opened" and "session
closed" with the reason.`,
	}
	validateCmd = command{
		name:     "validate",
		synopses: []string{"validate --config FILE [--project PATH]"},
		summary:  "check a config file and report every problem",
		about: `Validate reads a config file and prints every problem in it, one per
line with its key path, exiting 1 if there are any. Otherwise it prints
"FILE: ok (N servers)". It starts nothing, but it warns (on stderr,
without failing) about each stdio server whose command is not found on
PATH or cannot be run: serve would serve it with errors, or refuse to
start if it is "critical". It reads every format serve reads (see
'mcpgate serve --help'), and notes on stderr each key it accepts and
ignores (another client's "autoApprove").`,
	}
	versionCmd = command{
		name:     "version",
		synopses: []string{"version [--json]"},
		summary:  "print mcpgate's version, commit and the Go version it was built with",
		about: `Version prints "mcpgate VERSION" and, on a second line, the Go version
and platform. Then, when known: "commit REVISION" (with "(modified)" if
uncommitted changes were built), "committed TIME" and "built TIME".

The commit and its time come from the build info the go command stamps
when it builds in a git checkout; a build without .git (a container
build) sets them at link time: -ldflags "-X main.version=V -X
main.commit=REV -X main.buildTime=TIME".`,
	}
	commands = []*command{&serveCmd, &validateCmd, &stdioCmd, &benchCmd, &passwdCmd, &versionCmd}
)

// run is the whole command line: it returns the exit code. Only serve
// touches the process (signals) and calls into the gateway.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "bench":
		return bench(args[1:], stdout, stderr)
	case "stdio":
		return stdioBridge(args[1:], stdout, stderr)
	case "passwd":
		return passwd(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		return printVersion(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		printUsage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "mcpgate: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return exitUsage
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, "mcpgate puts MCP servers behind one HTTP endpoint, for many clients at once.\n\nUsage:\n")
	for _, c := range commands {
		for _, s := range c.synopses {
			fmt.Fprintf(w, "  mcpgate %s\n", s)
		}
	}
	fmt.Fprint(w, "\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'mcpgate COMMAND --help' for a command's flags.\n")
}

// parseFlags parses args into fs. If the command should not go on, done is
// true and code is its exit code: help was asked for (printed on stdout),
// or the flags were wrong (the error and usage printed on stderr).
func parseFlags(c *command, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(stderr) // where flag reports a bad flag
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, c, fs)
		return exitOK, true
	}
	if err != nil {
		printShortUsage(stderr, c)
		return exitUsage, true
	}
	return 0, false
}

// usageError reports a misuse of command c and returns exitUsage.
func usageError(stderr io.Writer, c *command, format string, args ...any) int {
	fmt.Fprintf(stderr, "mcpgate %s: %s\n", c.name, fmt.Sprintf(format, args...))
	printShortUsage(stderr, c)
	return exitUsage
}

func printShortUsage(w io.Writer, c *command) {
	for i, s := range c.synopses {
		prefix := "usage:"
		if i > 0 {
			prefix = "      "
		}
		fmt.Fprintf(w, "%s mcpgate %s\n", prefix, s)
	}
	fmt.Fprintf(w, "Run 'mcpgate %s --help' for details.\n", c.name)
}

func printHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	for i, s := range c.synopses {
		prefix := "usage:"
		if i > 0 {
			prefix = "      "
		}
		fmt.Fprintf(w, "%s mcpgate %s\n", prefix, s)
	}
	fmt.Fprintf(w, "\n%s\n", c.about)
	var flags strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&flags, "  --%s %s\n        %s\n", f.Name, arg, strings.ReplaceAll(usage, "\n", "\n        "))
	})
	if flags.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", flags.String())
	}
}

// serve implements `mcpgate serve`.
func serve(args []string, stdout, stderr io.Writer) int {
	c := &serveCmd
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	configPath := fs.String("config", "", "read the servers and settings from the JSON config `FILE`")
	listen := fs.String("listen", "", "listen on `ADDR` (host:port) instead of the config's gateway.listen\n(default \"127.0.0.1:8080\")")
	logLevel := fs.String("log-level", "", "log at `LEVEL` (debug, info, warn or error) instead of the\nconfig's gateway.logLevel (default \"info\")")
	logFormat := fs.String("log-format", "", "write logs as `FORMAT` (text or json) instead of the config's\ngateway.logFormat (default \"text\")")
	watch := fs.Bool("watch", true, "with --config, reload the file when it changes (SIGHUP always reloads it)")
	project := fs.String("project", "", projectUsage)
	processes := fs.Int("processes", 0, "with -- COMMAND, run `N` processes of it, each session pinned to one\n(a shared server's \"processes\"; default 1)")
	if code, done := parseFlags(c, fs, args, stdout, stderr); done {
		return code
	}
	rest := fs.Args()
	consumed := len(args) - len(rest)
	dashdash := consumed > 0 && args[consumed-1] == "--"
	processesSet := false
	fs.Visit(func(f *flag.Flag) { processesSet = processesSet || f.Name == "processes" })
	switch {
	case *configPath != "" && dashdash:
		return usageError(stderr, c, "use --config FILE or -- COMMAND, not both")
	case !dashdash && len(rest) > 0:
		return usageError(stderr, c, "unexpected argument %q (put a server's command after --)", rest[0])
	case dashdash && len(rest) == 0:
		return usageError(stderr, c, "missing COMMAND after --")
	case *configPath == "" && !dashdash:
		return usageError(stderr, c, "need --config FILE or -- COMMAND [ARGS...]")
	case *project != "" && *configPath == "":
		return usageError(stderr, c, "--project needs --config FILE (Claude Code's ~/.claude.json)")
	case processesSet && !dashdash:
		return usageError(stderr, c, "--processes needs -- COMMAND (in a config file, set mcpServers.NAME.processes)")
	case processesSet && (*processes < 1 || *processes > config.MaxPoolProcesses):
		return usageError(stderr, c, "--processes: must be from 1 to %d, not %d", config.MaxPoolProcesses, *processes)
	}
	if *listen != "" {
		if err := config.CheckListen(*listen); err != nil {
			return usageError(stderr, c, "--listen: %v", err)
		}
	}
	if *logLevel != "" {
		if _, err := config.ParseLogLevel(*logLevel); err != nil {
			return usageError(stderr, c, "--log-level: %v", err)
		}
	}
	if *logFormat != "" {
		if err := config.CheckLogFormat(*logFormat); err != nil {
			return usageError(stderr, c, "--log-format: %v", err)
		}
	}

	var cfg *config.Config
	if *configPath != "" {
		var err error
		if cfg, err = loadConfig(*configPath, *project); err != nil {
			printLoadError(stderr, *configPath, err)
			return exitFailure
		}
	} else {
		cfg = config.Default()
		s := cfg.Gateway.NewServer("default")
		s.Command, s.Args = rest[0], rest[1:]
		if processesSet {
			s.Processes = *processes
		}
		// The only server: a gateway without it serves nothing, so a
		// missing command is reported at once.
		s.Critical = true
		cfg.Servers[s.Name] = s
		cfg.BareServer = s.Name // also at /mcp: the one URL to give a client
	}
	override := func(cfg *config.Config) {
		if *listen != "" {
			cfg.Gateway.Listen = *listen
		}
		if *logLevel != "" {
			cfg.Gateway.LogLevel = *logLevel
		}
		if *logFormat != "" {
			cfg.Gateway.LogFormat = *logFormat
		}
	}
	override(cfg)
	if err := cfg.Validate(); err != nil {
		printLoadError(stderr, *configPath, err)
		return exitFailure
	}

	log := newLogger(stderr, &cfg.Gateway)
	logNotes(log, cfg)
	setMemoryLimit(log, os.Getenv("GOMEMLIMIT"), os.DirFS("/")) // memlimit.go
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer exitOnSecondSignal(ctx, stop, log)()
	// One version everywhere: what `mcpgate version` prints is what the
	// servers see as clientInfo.version.
	gateway.Version = versionString()
	gateway.Commit = readBuild().Commit // mcpgate_build_info's commit label
	runCtx := ctx
	if *configPath != "" { // reload.go
		sighup := make(chan os.Signal, 1)
		signal.Notify(sighup, syscall.SIGHUP)
		defer signal.Stop(sighup)
		runCtx = withReload(ctx, serveReload(*configPath, *project, *watch, sighup, override, log))
	}
	if err := runGateway(runCtx, cfg, log); err != nil {
		fmt.Fprintf(stderr, "mcpgate: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// newLogger makes the gateway's logger: g's level and format, on w.
func newLogger(w io.Writer, g *config.Gateway) *slog.Logger {
	opts := &slog.HandlerOptions{Level: g.Level(), ReplaceAttr: durationText} // logattrs.go
	if g.LogFormat == config.LogFormatJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// exitOnSecondSignal arranges that a signal after the first one (which
// canceled ctx and started the drain) ends the gateway at once, with exit
// status 1. Dying of the signal's default action would leave servers'
// grandchildren running: Pdeathsig kills only the direct children, so the
// process group of every server is killed first. stop ends the first
// signal's handling; the returned function ends the watch.
func exitOnSecondSignal(ctx context.Context, stop context.CancelFunc, log *slog.Logger) func() {
	second := make(chan os.Signal, 1)
	done := make(chan struct{})
	exited := make(chan struct{})
	unwatch := context.AfterFunc(ctx, func() {
		// Caught here before the first handler lets go, so that no signal
		// falls through to the default action.
		signal.Notify(second, os.Interrupt, syscall.SIGTERM)
		stop()
		go func() {
			defer close(exited)
			select {
			case sig := <-second:
				n := gateway.KillAll()
				log.Warn("second signal: killed the servers' process groups; exiting without draining",
					"signal", sig.String(), "groups", n)
				os.Exit(exitFailure)
			case <-done:
			}
		}()
	})
	return func() {
		if unwatch() {
			return // no first signal: nothing was started
		}
		signal.Stop(second)
		close(done)
		<-exited
	}
}

// validate implements `mcpgate validate`.
func validate(args []string, stdout, stderr io.Writer) int {
	c := &validateCmd
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	configPath := fs.String("config", "", "check the JSON config `FILE`")
	project := fs.String("project", "", projectUsage)
	if code, done := parseFlags(c, fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, c, "unexpected argument %q", fs.Arg(0))
	}
	if *configPath == "" {
		return usageError(stderr, c, "--config FILE is required")
	}
	cfg, err := loadConfig(*configPath, *project)
	var ps config.Problems
	switch {
	case errors.As(err, &ps):
		printLoadError(stdout, *configPath, err)
		return exitFailure
	case err != nil:
		fmt.Fprintf(stderr, "mcpgate: %v\n", err)
		return exitFailure
	}
	// A command that cannot run is a warning (serve answers that server's
	// clients with the error), except for a critical server: serve would
	// refuse to start, so validate fails as serve would.
	failed := false
	for _, p := range gateway.CheckCommands(cfg) {
		if p.Critical {
			failed = true
			fmt.Fprintf(stdout, "%s: mcpServers.%s.%s: %v (the server is critical: serve will not start)\n", *configPath, p.Server, p.Key, p.Err)
			continue
		}
		fmt.Fprintf(stderr, "%s: warning: mcpServers.%s.%s: %v (serve will answer its clients with this error)\n", *configPath, p.Server, p.Key, p.Err)
	}
	if failed {
		return exitFailure
	}
	printNotes(stderr, *configPath, cfg)
	n := len(cfg.Servers)
	plural := "s"
	if n == 1 {
		plural = ""
	}
	disabled := ""
	if len(cfg.Disabled) > 0 {
		disabled = fmt.Sprintf(", %d disabled", len(cfg.Disabled))
	}
	fmt.Fprintf(stdout, "%s: ok (%d server%s%s)\n", *configPath, n, plural, disabled)
	return exitOK
}

// printLoadError prints a config error: each problem on its own line, as
// "FILE: path: message" (or "path: message" without a file), or any other
// error (a file that cannot be read names itself) on one line.
func printLoadError(w io.Writer, file string, err error) {
	var ps config.Problems
	if !errors.As(err, &ps) {
		fmt.Fprintf(w, "mcpgate: %v\n", err)
		return
	}
	prefix := ""
	if file != "" {
		prefix = file + ": "
	}
	for _, line := range strings.Split(ps.Error(), "\n") {
		fmt.Fprintf(w, "%s%s\n", prefix, line)
	}
}

// printVersion implements `mcpgate version`.
func printVersion(args []string, stdout, stderr io.Writer) int {
	c := &versionCmd
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object: version, commit, commitTime, modified, buildTime, go, platform")
	if code, done := parseFlags(c, fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, c, "unexpected argument %q", fs.Arg(0))
	}
	b := readBuild()
	if !*asJSON {
		b.writeText(stdout)
		return exitOK
	}
	if err := b.writeJSON(stdout); err != nil {
		fmt.Fprintf(stderr, "mcpgate: %v\n", err)
		return exitFailure
	}
	return exitOK
}
