// Command mcpecho is mcpgate's benchmark fixture: a fast MCP server whose
// one tool, echo, returns its message argument as text content, so that a
// load generator can check every reply against its caller.
//
// By default it speaks newline-delimited JSON-RPC on stdin and stdout (run
// it behind the gateway). With --http ADDR it serves Streamable HTTP itself
// at /mcp, the no-proxy baseline for `mcpgate bench`; it then logs
// "msg=listening addr=HOST:PORT" on stderr (ADDR may use port 0).
//
// The server itself is internal/echoserver; this is flags and signals only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/internal/echoserver"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpecho", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "", "serve Streamable HTTP at http://`ADDR`/mcp instead of stdio")
	sseReplies := fs.Bool("sse-replies", false, "with -http: answer 2025-11-25 requests with an SSE stream (priming event, then the reply) instead of one JSON body")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpecho: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *addr == "" {
		if err := echoserver.ServeStdio(stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "mcpecho: %v\n", err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serveHTTP(ctx, *addr, *sseReplies, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		fmt.Fprintf(stderr, "mcpecho: %v\n", err)
		return 1
	}
	return 0
}

// serveHTTP serves the fixture at /mcp on addr until ctx ends.
func serveHTTP(ctx context.Context, addr string, sseReplies bool, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := echoserver.NewHandler()
	h.SSEReplies = sseReplies
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	h.Close() // GET streams end, so Shutdown does not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc
	return err
}
