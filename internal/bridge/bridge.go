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
// queue runs empty, and one goroutine per request of the stateless revision
// in flight (at most MaxStatelessInFlight; see stateless.go), cancelled and
// waited for before Run returns. Two exceptions, so that Run always returns in bounded
// time: a Read of Stdin that is blocked when ctx ends cannot be interrupted
// unless Stdin has SetReadDeadline (an *os.File on a pipe in non-blocking
// mode, a net.Conn) or the caller closes it; and a Write to a Stdout that is
// no longer read cannot be either. Run then returns without waiting for
// that goroutine (see Run for the bound): the reader exits at
// its next line or EOF without sending anything, the writer when its Write
// returns, and no line is queued any more.
//
// # Locking
//
// bridge.mu guards the requests awaiting replies (on both paths), the
// initialize kept for replay and the verdict about the remote's revision;
// it is never held during I/O or while calling the remote.Client or the
// remote.Stateless.
// The output queue is never closed: Run closes finish to stop the writer
// and abandon to make blocked writes drop their lines.
//
// Every request read from Stdin gets exactly one reply line: the server's,
// or a JSON-RPC error when the line is invalid, the message cannot be sent
// (the server is unreachable, say), the connection it went out on is lost,
// or Run ends first. Each message is written as one line, compacted: a
// pretty-printed reply would otherwise span several. When a legacy SSE stream is
// replaced (a new upstream session), the bridge replays the client's
// initialize on it and swallows the reply, so the client keeps working.
//
// Clients of the stateless revision (2026-07-28: no initialize, the
// protocol version in every request's _meta) take another path, which
// bypasses the remote.Client: see stateless.go.
package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// OutputQueueLen is how many messages wait for Stdout before deliveries
// block (backpressure on the server's streams rather than unbounded memory).
const OutputQueueLen = 1024

// DefaultDrainTimeout is Options.DrainTimeout's default.
const DefaultDrainTimeout = 5 * time.Second

// flushTimeout is added to the connect timeout to bound the end of Run: a
// client that closed stdin may have stopped reading stdout too.
const flushTimeout = 2 * time.Second

// Options configure Run.
type Options struct {
	// Remote is the server to forward to; Transport "" means auto, and
	// Remote.Logger defaults to Logger.
	Remote remote.Config
	Stdin  io.Reader // newline-delimited JSON-RPC messages from the client
	Stdout io.Writer // the server's messages, one per line; nothing else
	// DrainTimeout bounds the wait, once Stdin has ended, for the replies
	// to requests already read; requests still unanswered then get an
	// error reply. Default DefaultDrainTimeout (5s).
	DrainTimeout time.Duration
	// Logger receives the bridge's logs; never Stdout. Default
	// slog.Default().
	Logger *slog.Logger
}

// Run forwards messages between Stdin/Stdout and the remote server until
// Stdin reaches EOF or ctx is done, both of which end it normally (nil); it
// returns an error if the remote config is invalid, or reading Stdin or
// writing Stdout fails. A remote server that cannot be reached is not an
// error of Run: each request gets an error reply naming the cause.
//
// Every request read from Stdin gets exactly one reply line, also when Run
// ends: after EOF, Run waits up to DrainTimeout for the replies, answers the
// requests still pending with an error, and closes the remote.Client (a
// DELETE of the session, bounded by Remote.ConnectTimeout). A request the
// client cancelled (notifications/cancelled) is no longer waited for, and
// a late reply to it is dropped. So Run returns at most DrainTimeout +
// ConnectTimeout + 2s after EOF (with the 10s default, DrainTimeout + 12s)
// whatever the server does, and at most DrainTimeout + 2 x ConnectTimeout +
// 2s if Stdout is no longer read either.
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
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	b := &bridge{
		log:      opts.Logger.With("server", opts.Remote.Name),
		out:      make(chan []byte, OutputQueueLen),
		finish:   make(chan struct{}),
		abandon:  make(chan struct{}),
		writeErr: make(chan error, 1),
		pending:  map[string]struct{}{},
		drained:  make(chan struct{}),
		maxLine:  opts.Remote.MaxMessageBytes,
		calls:    map[string]*call{},
	}
	// Stateless requests outlive ctx only until Run cuts them, answering
	// each: ending them with ctx would leave them unanswered.
	b.slCtx, b.slStop = context.WithCancel(context.WithoutCancel(ctx))
	defer b.slStop()
	if b.maxLine <= 0 {
		b.maxLine = remote.DefaultMaxMessageBytes
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		b.writeLoop(opts.Stdout)
	}()
	defer b.abandonOutput() // no write blocks once Run has returned
	c, err := remote.Start(opts.Remote, b)
	if err != nil {
		close(b.finish)
		<-writerDone
		return err
	}
	b.client = c
	if opts.Remote.Transport != remote.TransportSSE {
		if b.sl, err = remote.NewStateless(opts.Remote); err != nil {
			c.Close()
			close(b.finish)
			<-writerDone
			return err
		}
	}

	readerDone := make(chan error, 1)
	go func() { readerDone <- b.readLoop(ctx, opts.Stdin) }()

	var runErr error
	why := "mcpgate: the bridge is stopping"
	select {
	case err := <-readerDone:
		runErr = err
		if err == nil && !b.drain(ctx, opts.DrainTimeout) && ctx.Err() == nil {
			why = fmt.Sprintf("mcpgate: stdin closed and no reply came within %v", opts.DrainTimeout)
		}
	case <-ctx.Done():
		b.unblock(opts.Stdin, readerDone)
	case err := <-b.writeErr:
		runErr = fmt.Errorf("bridge: writing stdout: %w", err)
		b.unblock(opts.Stdin, readerDone)
	}
	// From here on, a Stdout that is not read must not hold Run: past the
	// deadline, lines are dropped, so that neither the Client's Handler
	// calls nor the last error replies block.
	connect := opts.Remote.ConnectTimeout
	if connect <= 0 {
		connect = remote.DefaultConnectTimeout
	}
	deadline := time.AfterFunc(connect+flushTimeout, b.abandonOutput)
	defer deadline.Stop()
	c.Close()
	b.failPending(why)
	b.stopStateless()
	close(b.finish)
	select {
	case <-writerDone:
	case <-b.abandon:
		b.log.Warn("stdout is not being read; exiting without the last lines")
	}
	return runErr
}

// drain waits, after stdin ended, until every request read from it was
// answered (a client may close stdin right after its last request, as in
// `echo REQUEST | mcpgate stdio`), ctx ends, or timeout passes. It reports
// whether nothing is pending.
func (b *bridge) drain(ctx context.Context, timeout time.Duration) bool {
	b.mu.Lock()
	b.eof = true
	b.settleLocked()
	b.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-b.drained:
		return true
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	}
}

// failPending answers every request still awaiting a reply, on either
// path, with an error saying why.
func (b *bridge) failPending(why string) {
	b.failCalls(why)
	b.mu.Lock()
	ids := make([][]byte, 0, len(b.pending))
	for id := range b.pending {
		ids = append(ids, []byte(id))
	}
	b.pending = map[string]struct{}{}
	b.settleLocked()
	b.mu.Unlock()
	for _, id := range ids {
		b.write(jsonrpc.ErrorResponse(id, protocol.CodeServerError, why))
	}
}

// settleLocked signals drain once stdin has ended and nothing is pending
// but subscriptions/listen requests (which end only when cancelled).
func (b *bridge) settleLocked() {
	if b.eof && len(b.pending) == 0 && b.drainCalls == 0 && !b.isDrained {
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

	out      chan []byte   // lines for Stdout, without the newline
	finish   chan struct{} // closed by Run: the writer writes what is queued and returns
	abandon  chan struct{} // closed when Run gives up on Stdout: write drops lines
	writeErr chan error    // the first write error

	abandonOnce sync.Once

	mu sync.Mutex
	// guarded by mu:
	pending   map[string]struct{} // raw ids of client requests awaiting a reply
	initMsg   []byte              // the client's initialize, for replay
	replayID  []byte              // id of the replayed initialize in flight
	replaySeq int
	eof       bool          // stdin has ended
	drained   chan struct{} // closed once eof and no request is pending
	isDrained bool
	lost      error // why the latest connection was lost (Handler.Exited)

	// The stateless path (stateless.go). sl (nil with the legacy SSE
	// transport), slCtx and slStop are static after Run set them; slWG
	// counts the goroutines of the calls, which Run waits for.
	sl        *remote.Stateless
	slCtx     context.Context
	slStop    context.CancelFunc
	slWG      sync.WaitGroup
	slRefused atomic.Int64 // requests refused at MaxStatelessInFlight

	// guarded by mu:
	calls      map[string]*call // raw ids of stateless requests in flight
	drainCalls int              // how many of calls are not subscriptions/listen
	era        era              // the verdict about the remote
	probe      *probe           // the server/discover in progress, if any
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
			b.write(jsonrpc.ErrorResponse(nil, protocol.CodeParseError, fmt.Sprintf("mcpgate: message exceeds %d bytes", b.maxLine)))
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
	if b.statelessRequest(&msg, line) {
		return
	}
	var id []byte
	switch {
	case msg.Kind == jsonrpc.KindRequest:
		id = msg.Bytes(msg.ID)
		b.mu.Lock()
		b.pending[string(id)] = struct{}{}
		if msg.MethodIs(protocol.MethodInitialize) {
			b.initMsg = append([]byte(nil), line...)
		}
		b.mu.Unlock()
	case msg.Kind == jsonrpc.KindNotification && msg.MethodIs(protocol.NotificationCancelled):
		// The client gave up on that request: a reply is no longer due
		// (nor waited for when stdin ends), though one may still come.
		if rid := msg.Bytes(msg.CancelRequestID); rid != nil {
			b.mu.Lock()
			delete(b.pending, string(rid))
			b.settleLocked()
			b.mu.Unlock()
		}
	}
	if err := b.client.Send(ctx, line); err != nil && id != nil {
		text := "mcpgate: " + err.Error()
		b.mu.Lock()
		if lost := b.lost; lost != nil && errors.Is(err, remote.ErrNotConnected) {
			text += " (" + lost.Error() + ")"
		}
		b.mu.Unlock()
		b.answer(id, jsonrpc.ErrorResponse(id, protocol.CodeServerError, text))
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

// write queues one message for Stdout as one line: it copies msg without
// the whitespace outside its strings, so that a pretty-printed message
// (valid JSON-RPC from a remote server) does not become several lines. It
// blocks while the queue is full, unless output was abandoned (then the
// line is dropped).
func (b *bridge) write(msg []byte) {
	line := jsonrpc.AppendCompact(make([]byte, 0, len(msg)), msg)
	select {
	case b.out <- line:
	case <-b.abandon:
	}
}

// abandonOutput makes every write, pending or later, drop its line.
func (b *bridge) abandonOutput() {
	b.abandonOnce.Do(func() { close(b.abandon) })
}

// writeLoop is the only writer of Stdout. It flushes whenever nothing else
// is queued, and returns once finish is closed and the queue is empty.
// After a write error it reports it and discards the rest.
func (b *bridge) writeLoop(stdout io.Writer) {
	bw := bufio.NewWriterSize(stdout, 64<<10)
	var failed error
	put := func(line []byte) {
		if failed != nil {
			return
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
	for {
		select {
		case line := <-b.out:
			put(line)
		case <-b.finish:
			for {
				select {
				case line := <-b.out:
					put(line)
				default:
					if failed == nil {
						if err := bw.Flush(); err != nil {
							b.writeErr <- err
						}
					}
					return
				}
			}
		}
	}
}

// bufErr returns a bufio.Writer's sticky error, which a Write that filled
// the buffer may have hit.
func bufErr(bw *bufio.Writer) error {
	_, err := bw.Write(nil)
	return err
}
