package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mcpgate/mcpgate/internal/bridge"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

var stdioCmd = command{
	name:     "stdio",
	synopses: []string{"stdio --url URL [--header 'NAME: VALUE']... [--transport auto|http|sse] [--drain-timeout D] [--log-level LEVEL]"},
	summary:  "serve a remote MCP server as a local stdio server",
	about: `Stdio is a stdio MCP server that forwards every message to the remote
MCP server at URL, typically another mcpgate
(http://HOST:PORT/servers/NAME/mcp), so that clients that only start
stdio servers (Claude Desktop, say) can use remote ones:

  {"mcpServers": {"memory": {"command": "mcpgate",
    "args": ["stdio", "--url", "https://gw.example/servers/memory/mcp",
             "--header", "Authorization: Bearer ${TOKEN}"]}}}

It reads newline-delimited JSON-RPC messages on stdin and writes the
server's on stdout; logs go to stderr. --transport auto (the default)
tries Streamable HTTP and falls back to the legacy HTTP+SSE transport of
2024-11-05. TLS certificates are verified.

Clients of the stateless revision 2026-07-28 (no initialize; the
protocol version in every request's _meta) are served too: at their first
request it asks the server once (server/discover) whether it speaks that
revision. If it does, each such request goes out as its own POST, several
at once, and notifications/cancelled cancels one (subscriptions/listen
included); if not (or with --transport sse), each gets the error -32022
listing the session-era versions, so that a client speaking both falls
back to initialize.

Every request gets exactly one reply line: the server's, or a JSON-RPC
error naming the cause (for example "remote http://127.0.0.1:1/mcp
unreachable: connection refused"). It stops when stdin ends, once the
replies to requests already sent have come or --drain-timeout has passed
(requests still unanswered then get an error), or at SIGINT or SIGTERM,
ending the remote session (a DELETE, bounded by the 10s connect
timeout): so it exits at most drain timeout + about 15s after stdin
closes, whatever the server does. The exit status is 0 also when the
server could not be reached (the errors went to the client, and to the
log on stderr); 1 for an invalid URL, or when reading stdin or writing
stdout failed; 2 for a usage error.`,
}

// stdioInput is what `mcpgate stdio` reads; tests replace it.
var stdioInput io.Reader = os.Stdin

// remoteHeaders collects repeated --header flags of `mcpgate stdio` (a later
// one with the same name wins: Config.Headers holds one value per name).
type remoteHeaders map[string]string

func (h remoteHeaders) String() string { return "" }

func (h remoteHeaders) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("want 'NAME: VALUE', got %q", s)
	}
	h[name] = strings.TrimSpace(value)
	return nil
}

// stdioBridge implements `mcpgate stdio`.
func stdioBridge(args []string, stdout, stderr io.Writer) int {
	c := &stdioCmd
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	url := fs.String("url", "", "forward to the MCP server at `URL` (http or https)")
	headers := remoteHeaders{}
	fs.Var(headers, "header", "add the HTTP header `'NAME: VALUE'` to every request (repeatable);\nfor credentials: values are never logged")
	transport := fs.String("transport", remote.TransportAuto, "`TRANSPORT` to use: auto, http (Streamable HTTP) or sse (legacy HTTP+SSE)")
	drain := fs.Duration("drain-timeout", bridge.DefaultDrainTimeout, "after stdin ends, wait at most `D` for the replies still due")
	logLevel := fs.String("log-level", "info", "log at `LEVEL` (debug, info, warn or error) on stderr")
	if code, done := parseFlags(c, fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, c, "unexpected argument %q", fs.Arg(0))
	}
	if *url == "" {
		return usageError(stderr, c, "--url URL is required")
	}
	switch *transport {
	case remote.TransportAuto, remote.TransportHTTP, remote.TransportSSE:
	default:
		return usageError(stderr, c, "--transport: %q is not auto, http or sse", *transport)
	}
	if *drain <= 0 {
		return usageError(stderr, c, "--drain-timeout: %v is not positive", *drain)
	}
	level, err := config.ParseLogLevel(*logLevel)
	if err != nil {
		return usageError(stderr, c, "--log-level: %v", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A second signal kills at once.
	context.AfterFunc(ctx, stop)
	err = bridge.Run(ctx, bridge.Options{
		Remote: remote.Config{
			Name:      "stdio",
			URL:       *url,
			Transport: *transport,
			Headers:   headers,
			Logger:    log,
		},
		Stdin:        stdioInput,
		Stdout:       stdout,
		DrainTimeout: *drain,
		Logger:       log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "mcpgate stdio: %v\n", err)
		return exitFailure
	}
	return exitOK
}
