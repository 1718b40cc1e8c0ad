// Command mcpecho is mcpgate's benchmark fixture: a fast MCP server whose
// one tool, echo, returns its message argument as text content, so that a
// load generator can check every reply against its caller.
//
// By default it speaks newline-delimited JSON-RPC on stdin and stdout (run
// it behind the gateway). With --http ADDR it serves Streamable HTTP itself
// at /mcp, the no-proxy baseline for `mcpgate bench`; it then logs
// "msg=listening addr=HOST:PORT" on stderr (ADDR may use port 0).
//
// It is a dual-era server on both transports: the session eras
// (initialize, 2024-11-05 to 2025-11-25) and the stateless revision
// 2026-07-28 (server/discover, and requests naming their version in
// params._meta, answered without initialize or session).
//
// --scan answers echo requests shaped as `mcpgate bench` sends them from a
// scan of their bytes instead of parsing them (payload benchmarks then
// measure what is between client and fixture); --burn D makes each echo
// cost D of CPU time (a server bounded by its CPU).
//
// The server itself is internal/echoserver; this is flags, signals and
// putting stdin and stdout into Go's poller.
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
	"sync"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/internal/echoserver"
)

// maxBurn bounds --burn: a call that costs more than a second of CPU is a
// mistake, not a benchmark.
const maxBurn = time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpecho", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "", "serve Streamable HTTP at http://`ADDR`/mcp instead of stdio")
	sseReplies := fs.Bool("sse-replies", false, "with -http: answer 2025-11-25 requests with an SSE stream (priming event, then the reply) instead of one JSON body")
	scan := fs.Bool("scan", false, "answer tools/call echo requests written as `mcpgate bench` writes them from a scan of their bytes, without parsing them (for payload benchmarks)")
	burn := fs.Duration("burn", 0, "spend `D` of CPU time (a busy loop, not a sleep) on each tools/call echo before answering")
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
	if *burn < 0 || *burn > maxBurn {
		fmt.Fprintf(stderr, "mcpecho: --burn %s is not between 0 and %s\n", *burn, maxBurn)
		return 2
	}
	opts := echoserver.Options{Scan: *scan, Burn: *burn}
	if *addr == "" {
		in, out := stdin, stdout
		if f, ok := stdin.(*os.File); ok {
			p, restore := pollable(f)
			defer restore()
			in = p
		}
		if f, ok := stdout.(*os.File); ok {
			p, restore := pollable(f)
			defer restore()
			out = p
		}
		if err := echoserver.ServeStdioWith(in, out, opts); err != nil {
			fmt.Fprintf(stderr, "mcpecho: %v\n", err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serveHTTP(ctx, *addr, *sseReplies, opts, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		fmt.Fprintf(stderr, "mcpecho: %v\n", err)
		return 1
	}
	return 0
}

// pollable returns a file for f's descriptor in non-blocking mode, so that
// Go's poller waits on it instead of a thread blocked in read(2) or
// write(2), and a func that puts the blocking mode back. On such a stdout
// ServeStdio also writes replies from its reading goroutine. Together they
// let a call wake the process once instead of several times, which cuts
// the CPU a call costs the child by a third to a half.
//
// Only pipes and sockets are changed: those the gateway gives its children
// are theirs alone. The mode belongs to the open file description, so on a
// terminal it would leak to the shell; anything but a pipe or socket is
// returned unchanged and still works, at the old cost. Descriptor 1 keeps
// Go's rule for stdout: a write failing with EPIPE raises SIGPIPE, so a
// reader that goes away ends the process even while stdin stays open.
func pollable(f *os.File) (*os.File, func()) {
	nop := func() {}
	rc, err := f.SyscallConn()
	if err != nil {
		return f, nop
	}
	fd := -1
	_ = rc.Control(func(d uintptr) { fd = int(d) })
	var st syscall.Stat_t
	if fd < 0 || syscall.Fstat(fd, &st) != nil {
		return f, nop
	}
	if typ := st.Mode & syscall.S_IFMT; typ != syscall.S_IFIFO && typ != syscall.S_IFSOCK {
		return f, nop
	}
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 || flags&syscall.O_NONBLOCK != 0 {
		return f, nop // already non-blocking: os.NewFile made f pollable then, or it is not ours to change
	}
	if syscall.SetNonblock(fd, true) != nil {
		return f, nop
	}
	p := os.NewFile(uintptr(fd), f.Name()) // sees O_NONBLOCK: joins the poller
	pinned.Lock()
	pinned.files = append(pinned.files, p)
	pinned.Unlock()
	return p, func() { _ = syscall.SetNonblock(fd, false) }
}

// pinned keeps the files pollable makes from being collected: each shares
// its descriptor with the caller's file, and its finalizer would close the
// descriptor under that file.
var pinned struct {
	sync.Mutex
	files []*os.File // guarded by the mutex
}

// serveHTTP serves the fixture at /mcp on addr until ctx ends.
func serveHTTP(ctx context.Context, addr string, sseReplies bool, opts echoserver.Options, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := echoserver.NewHandler()
	h.SSEReplies = sseReplies
	h.Options = opts
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
