// Package bridge turns a remote MCP server into a stdio one: it reads
// newline-delimited JSON-RPC messages from a reader (a stdio client's pipe),
// sends them through a remote.Client, and writes every message the server
// sends as one line to a writer. `mcpgate stdio` runs it, so that clients
// that only speak stdio (Claude Desktop, say) can use a remote server,
// typically another mcpgate.
//
// # Ownership and goroutines
//
// Run owns everything it starts and waits for it before returning: the
// remote.Client (closed, which DELETEs its session, when stdin ends or ctx
// is done), one goroutine reading Stdin, the only reader, and one writing
// Stdout, the only writer, fed by a bounded queue and flushing whenever the
// queue runs empty. One exception: a Read of Stdin that is blocked when ctx
// ends cannot be interrupted unless Stdin has SetReadDeadline (an *os.File
// on a pipe in non-blocking mode, a net.Conn) or the caller closes it; Run
// then returns without waiting for it, and the reader exits at its next
// line or EOF without sending anything.
//
// # Locking
//
// bridge.mu guards the requests awaiting replies and the initialize kept for
// replay; bridge.outMu guards the output queue's closing. Neither is held
// during I/O or while calling the remote.Client.
//
// Every request read from Stdin gets exactly one reply line: the server's,
// or a JSON-RPC error when the line is invalid, the message cannot be sent,
// or the connection it went out on is lost. When a legacy SSE stream is
// replaced (a new upstream session), the bridge replays the client's
// initialize on it and swallows the reply, so the client keeps working.
package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/remote"
)

// OutputQueueLen is how many messages wait for Stdout before deliveries
// block (backpressure on the server's streams rather than unbounded memory).
const OutputQueueLen = 1024

// Options configure Run.
type Options struct {
	// Remote is the server to forward to; Transport "" means auto, and
	// Remote.Logger defaults to Logger.
	Remote remote.Config
	Stdin  io.Reader // newline-delimited JSON-RPC messages from the client
	Stdout io.Writer // the server's messages, one per line; nothing else
	// Logger receives the bridge's logs; never Stdout. Default
	// slog.Default().
	Logger *slog.Logger
}

// Run forwards messages between Stdin/Stdout and the remote server until
// Stdin reaches EOF and every request read has been answered, or ctx is
// done, both of which end it normally (nil);
// it returns an error if the remote config is invalid, or reading Stdin or
// writing Stdout fails.
func Run(ctx context.Context, opts Options) error {
	if opts.Stdin == nil || opts.Stdout == nil {
		return errors.New("bridge: Stdin and Stdout are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Remote.Logger == nil {
		opts.Remote.Logger = opts.Logger
	}
	b := &bridge{
		log:      opts.Logger.With("server", opts.Remote.Name),
		out:      make(chan []byte, OutputQueueLen),
		writeErr: make(chan error, 1),
		pending:  map[string]struct{}{},
		drained:  make(chan struct{}),
		maxLine:  opts.Remote.MaxMessageBytes,
	}
	if b.maxLine <= 0 {
		b.maxLine = remote.DefaultMaxMessageBytes
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		b.writeLoop(opts.Stdout)
	}()
	c, err := remote.Start(opts.Remote, b)
	if err != nil {
		b.closeOutput()
		<-writerDone
		return err
	}
	b.client = c

	readerDone := make(chan error, 1)
	go func() { readerDone <- b.readLoop(ctx, opts.Stdin) }()

	var runErr error
	select {
	case err := <-readerDone:
		runErr = err
		if err == nil {
			b.drain(ctx)
		}
	case <-ctx.Done():
		b.unblock(opts.Stdin, readerDone)
	case err := <-b.writeErr:
		runErr = fmt.Errorf("bridge: writing stdout: %w", err)
		b.unblock(opts.Stdin, readerDone)
	}
	c.Close()
	b.closeOutput()
	<-writerDone
	return runErr
}

// drain waits, after stdin ended, until every request read from it was
// answered (a client may close stdin right after its last request, as in
// `echo REQUEST | mcpgate stdio`), or ctx ends.
func (b *bridge) drain(ctx context.Context) {
	b.mu.Lock()
	b.eof = true
	b.settleLocked()
	b.mu.Unlock()
	select {
	case <-b.drained:
	case <-ctx.Done():
	}
}

// settleLocked signals drain once stdin has ended and nothing is pending.
func (b *bridge) settleLocked() {
	if b.eof && len(b.pending) == 0 && !b.isDrained {
		b.isDrained = true
		close(b.drained)
	}
}

// unblock ends a Read of stdin blocked when Run must return, if stdin
// allows it, and waits for the reader then.
func (b *bridge) unblock(stdin io.Reader, readerDone <-chan error) {
	if d, ok := stdin.(interface{ SetReadDeadline(time.Time) error }); ok && d.SetReadDeadline(time.Now()) == nil {
		<-readerDone
	}
}

// bridge is the state of one Run.
type bridge struct {
	// Static after Run started it.
	log     *slog.Logger
	client  *remote.Client
	maxLine int

	out      chan []byte // lines for Stdout, without the newline
	writeErr chan error  // the first write error

	outMu     sync.Mutex
	outClosed bool // guarded by outMu; out is closed

	mu sync.Mutex
	// guarded by mu:
	pending   map[string]struct{} // raw ids of client requests awaiting a reply
	initMsg   []byte              // the client's initialize, for replay
	replayID  []byte              // id of the replayed initialize in flight
	replaySeq int
	eof       bool          // stdin has ended
	drained   chan struct{} // closed once eof and no request is pending
	isDrained bool
}

// readLoop reads Stdin until EOF, forwarding each message.
func (b *bridge) readLoop(ctx context.Context, stdin io.Reader) error {
	br := bufio.NewReaderSize(stdin, 64<<10)
	for {
		line, tooLong, err := readLine(br, b.maxLine)
		if ctx.Err() != nil {
			return nil
		}
		if tooLong {
			b.write(jsonrpc.ErrorResponse(nil, jsonrpc.CodeParseError, fmt.Sprintf("mcpgate: message exceeds %d bytes", b.maxLine)))
		} else if len(line) > 0 {
			b.forward(ctx, line)
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("bridge: reading stdin: %w", err)
		}
	}
}

// forward validates one line from the client and sends it.
func (b *bridge) forward(ctx context.Context, line []byte) {
	if jsonrpc.IsBatch(line) {
		elems, err := jsonrpc.SplitBatch(line)
		if err != nil {
			b.write(jsonrpc.ErrorResponse(nil, jsonrpc.Code(err), err.Error()))
			return
		}
		for _, e := range elems {
			b.forward(ctx, e)
		}
		return
	}
	msg, err := jsonrpc.Parse(line)
	if err != nil {
		b.write(jsonrpc.ErrorResponse(idOf(line), jsonrpc.Code(err), err.Error()))
		return
	}
	var id []byte
	if msg.Kind == jsonrpc.KindRequest {
		id = msg.Bytes(msg.ID)
		b.mu.Lock()
		b.pending[string(id)] = struct{}{}
		if msg.MethodIs("initialize") {
			b.initMsg = append([]byte(nil), line...)
		}
		b.mu.Unlock()
	}
	if err := b.client.Send(ctx, line); err != nil && id != nil {
		b.answer(id, jsonrpc.ErrorResponse(id, jsonrpc.CodeServerError, "mcpgate: "+err.Error()))
	}
}

// answer writes a reply for request id unless it was answered already.
func (b *bridge) answer(id, reply []byte) {
	b.mu.Lock()
	_, ok := b.pending[string(id)]
	delete(b.pending, string(id))
	b.settleLocked()
	b.mu.Unlock()
	if ok {
		b.write(reply)
	}
}

// write queues one line for Stdout; it copies msg.
func (b *bridge) write(msg []byte) {
	line := append(make([]byte, 0, len(msg)), msg...)
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if !b.outClosed {
		b.out <- line
	}
}

func (b *bridge) closeOutput() {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if !b.outClosed {
		b.outClosed = true
		close(b.out)
	}
}

// writeLoop is the only writer of Stdout. It flushes whenever nothing else
// is queued. After a write error it reports it and discards the rest.
func (b *bridge) writeLoop(stdout io.Writer) {
	bw := bufio.NewWriterSize(stdout, 64<<10)
	var failed error
	for line := range b.out {
		if failed != nil {
			continue
		}
		_, _ = bw.Write(line)
		_ = bw.WriteByte('\n')
		if len(b.out) == 0 {
			failed = bw.Flush()
		}
		if failed == nil {
			failed = bufErr(bw)
		}
		if failed != nil {
			b.writeErr <- failed
		}
	}
	if failed == nil {
		if err := bw.Flush(); err != nil {
			b.writeErr <- err
		}
	}
}

// bufErr returns a bufio.Writer's sticky error, which a Write that filled
// the buffer may have hit.
func bufErr(bw *bufio.Writer) error {
	_, err := bw.Write(nil)
	return err
}
