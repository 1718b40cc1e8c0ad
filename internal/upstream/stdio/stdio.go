package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/buffers"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Defaults for the zero values of StdioConfig fields.
const (
	DefaultMaxLineBytes = 16 << 20
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
	DefaultStopGrace    = 2 * time.Second
	DefaultStuckTimeout = 30 * time.Second
	DefaultStableAfter  = 30 * time.Second

	DefaultStderrBytesPerSec = 64 << 10
)

// SendQueueLen is how many messages Send queues per process before it blocks
// (until the writer catches up, ctx ends, the process dies or Close) and
// TrySend returns ErrQueueFull.
const SendQueueLen = 1024

// OversizedPrefixLen is how much of an oversized line Handler.Oversized sees.
const OversizedPrefixLen = 4 << 10

// Handler receives what a Stdio reads: the contract of upstream.Handler
// and upstream.Supervised, with these specifics. Started, Line, Oversized
// and Exited come from the generation's reader goroutine, Waiting from the
// supervisor, never concurrently. Line gets each non-empty stdout line
// (without the newline); Oversized, a line longer than MaxLineBytes (its
// first OversizedPrefixLen bytes). Exited's err is nil after a clean stop
// by Close, else an *ExitError (errors.Is(err, ErrExited)). Waiting is
// called only when Restart is set: after Exited returned (with the error
// Exited got), or after a start that could not run the command (err wraps
// ErrSpawn, e.g. "command not found: uvx"), including the very first one;
// no Started follows if Close comes first. A method may call Send,
// TrySend, Restart, Served, Generation, PID and Stats. It should not call
// Send with a context that never ends (use TrySend): if the child does not
// read stdin either, only the stuck rule (StuckTimeout) breaks that cycle.
type Handler = upstream.Supervised

// StdioConfig configures a Stdio. Only Command is required.
type StdioConfig struct {
	Name    string   // server name, for logs
	Command string   // program, looked up in PATH if it has no slash
	Args    []string // arguments after the program name
	// Env is the process's whole environment (KEY=value). nil inherits the
	// gateway's environment, which only tests should want: callers build a
	// minimal one so that the gateway's secrets do not reach the child.
	Env []string
	Dir string // working directory; "" is the gateway's

	// MaxLineBytes bounds one stdout line; longer lines go to
	// Handler.Oversized. Default 16 MiB.
	MaxLineBytes int

	// PipeBytes, if positive, asks the kernel for stdin and stdout pipes of
	// this capacity (best effort: over the system's limit the default
	// stays). A big message then crosses in a few wakeups of the child, not
	// one per 64 KiB. Capacity is charged to the user per pipe whether used
	// or not, so only servers with few processes should ask. 0 keeps the
	// system default (64 KiB on Linux).
	PipeBytes int

	// Restart restarts the server after an exit that Close did not ask for.
	// The n-th consecutive restart waits a random time in [d/2, d] with
	// d = min(MinBackoff*2^n, MaxBackoff) ("equal jitter": restarts spread
	// out, yet never come sooner than half the nominal delay). The count n
	// resets to 0 only when the process that exited had served a request
	// (Stdio.Served), or had run for at least StableAfter and was not killed
	// by the gateway (Restart, the stuck rule): a server that crashes on its
	// first request, or hangs in initialize until it is restarted, keeps
	// backing off. A start that cannot run the command
	// counts as a failed run and is retried the same way until Close, even
	// the first one (StartStdio then returns the Stdio, not the error).
	Restart     bool
	MinBackoff  time.Duration // default 100ms
	MaxBackoff  time.Duration // default 30s
	StableAfter time.Duration // default 30s

	// StuckTimeout is how long one write to stdin may make no progress
	// before the process counts as stuck (it stopped reading stdin): it is
	// logged, its process group gets SIGKILL, Exited reports an *ExitError
	// with Stuck set, and the supervisor restarts it when Restart is set.
	// Progress is checked every StuckTimeout/8, so the kill comes between
	// StuckTimeout and 1.125*StuckTimeout after the last byte the child
	// took. Default 30s.
	StuckTimeout time.Duration

	// StopGrace is how long Close waits after closing stdin before sending
	// SIGTERM to the process group, and again before SIGKILL. It also bounds
	// how long stdout may stay open after the leader exited. Default 2s.
	StopGrace time.Duration

	// StderrBytesPerSec bounds how many bytes of the child's stderr are
	// logged per second (each line at info, counted as its length plus 100
	// bytes for its log record, so tiny lines cannot flood the log either;
	// the first line of each second is logged whatever its cost). Stderr is always read in full,
	// so the child never blocks on it; lines over the budget are counted in
	// Stats and summarised in one line ("stderr: N bytes in M lines not
	// logged") when the next second's first line arrives, or at exit.
	// Default 64 KiB.
	StderrBytesPerSec int

	// StderrLevel is the level of a stderr line that names none; a line
	// that does ("ERROR: ...", "[warn]", "level=debug", a JSON line's
	// "level": see stderr_level.go) is logged at its own. Default
	// slog.LevelInfo (the zero value).
	StderrLevel slog.Level

	// Logger receives lifecycle events and the child's stderr (each line as
	// the message, at its level, with server=Name, stream="stderr", pid).
	// Default slog.Default().
	Logger *slog.Logger
}

// Stats are counters of a Stdio since it started.
type Stats struct {
	Generation     uint64 // generation of the latest process
	Running        bool   // whether a process is up now
	Restarts       uint64 // processes started after the first
	SpawnFailures  uint64 // starts that could not run the command
	Lines          uint64 // stdout lines delivered to Handler.Line
	OversizedLines uint64 // stdout lines delivered to Handler.Oversized
	Sent           uint64 // messages written to stdin
	Writes         uint64 // write calls on stdin (Sent/Writes = coalescing)
	QueueFull      uint64 // Sends that found the queue full and had to wait, TrySends refused
	Dropped        uint64 // queued messages discarded because their process ended
	Stuck          uint64 // processes killed for not reading stdin
	Killed         uint64 // processes killed by Restart, or for closing their stdin

	StderrDroppedLines uint64 // stderr lines read but not logged (over StderrBytesPerSec)
	StderrDroppedBytes uint64 // their bytes
}

// Stdio supervises one stdio MCP server process. It is safe for concurrent
// use; see the package comment for its goroutines and locks.
type Stdio struct {
	// Static after StartStdio.
	cfg StdioConfig // defaults applied
	h   Handler
	log *slog.Logger // cfg.Logger with server=Name

	closing   chan struct{} // closed by Close
	closeOnce sync.Once
	done      chan struct{}  // closed when the supervisor returns
	wg        sync.WaitGroup // every goroutine the Stdio started

	mu sync.Mutex
	// guarded by mu:
	cur    *proc  // running process; nil between an exit and the restart
	last   *proc  // latest process, running or not (for Served)
	gen    uint64 // generation of the latest process
	closed bool

	restarts, spawnFailures, lines, oversized atomic.Uint64
	sent, writes, queueFull, dropped          atomic.Uint64
	stuck, killed                             atomic.Uint64
	stderrDroppedLines, stderrDroppedBytes    atomic.Uint64

	recent recent // last stderr lines and exit, for status (recent.go)
}

// StartStdio starts the first process and supervises it until Close,
// restarting it when cfg.Restart is set. If the command cannot be run (not
// found, not executable), StartStdio returns an error wrapping ErrSpawn
// ("command not found: uvx") when cfg.Restart is not set; with Restart it
// returns the Stdio anyway, calls h.Waiting with that error and retries with
// backoff, so that one server that cannot start does not stop its owner.
// It returns an error for an invalid cfg (empty Command) or a nil h.
func StartStdio(cfg StdioConfig, h Handler) (*Stdio, error) {
	if cfg.Command == "" {
		return nil, errors.New("upstream: StdioConfig.Command is empty")
	}
	if h == nil {
		return nil, errors.New("upstream: nil Handler")
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	if cfg.StableAfter <= 0 {
		cfg.StableAfter = DefaultStableAfter
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.StuckTimeout <= 0 {
		cfg.StuckTimeout = DefaultStuckTimeout
	}
	if cfg.StderrBytesPerSec <= 0 {
		cfg.StderrBytesPerSec = DefaultStderrBytesPerSec
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Stdio{
		cfg:     cfg,
		h:       h,
		log:     cfg.Logger.With("server", cfg.Name),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	p, err := s.startProc()
	if err != nil {
		s.spawnFailures.Add(1)
		if !cfg.Restart {
			return nil, fmt.Errorf("upstream %s: %w", cfg.Name, err)
		}
		s.log.Error("upstream start failed; will retry", "err", err)
	}
	s.wg.Add(1)
	go s.supervise(p, err)
	return s, nil
}

// Send queues one message (without its newline; Send adds it) for the stdin
// of the current process. It copies msg, so the caller may reuse it at once.
// A message containing '\n' or '\r' is compacted (jsonrpc.AppendCompact:
// whitespace outside strings removed) so that it stays one line; one that
// still has one, inside a string (invalid JSON), is refused with ErrNewline.
// A nil error means queued, not delivered: a message still queued when its
// process dies is dropped and counted (the Handler's Exited already tells the
// owner). Send blocks only while the queue of SendQueueLen messages is full,
// and returns ErrNotRunning when no process is up, ErrClosed after Close,
// and ctx.Err() if ctx ends while the queue is full. A process whose stdin
// stays blocked is killed after StuckTimeout, which also ends the wait.
// Safe for concurrent use, including with Close.
func (s *Stdio) Send(ctx context.Context, msg []byte) error {
	return s.send(ctx, 0, msg, true)
}

// TrySend is Send that never blocks: it returns ErrQueueFull instead of
// waiting when the queue is full. Readers and timers use it for best-effort
// messages (cancellations, replies to pings), which must not wait on a
// server. Safe for concurrent use.
func (s *Stdio) TrySend(msg []byte) error {
	return s.send(context.Background(), 0, msg, false)
}

// SendGen is Send restricted to generation gen: it returns ErrNotRunning
// unless gen is the running process. Owners use it for messages that belong
// to one process, such as replies to its server-to-client requests, which
// must not reach a restarted successor.
func (s *Stdio) SendGen(ctx context.Context, gen uint64, msg []byte) error {
	if gen == 0 {
		return ErrNotRunning
	}
	return s.send(ctx, gen, msg, true)
}

// TrySendGen is TrySend restricted to generation gen: it never blocks, and
// returns ErrNotRunning unless gen is the running process (ErrQueueFull when
// its queue is full). Readers use it for answers to a process's own
// server-to-client requests: in the window between a process's exit and
// its owner hearing of it (Handler.Exited), such an answer must not reach
// the restarted successor, which never asked. Safe for concurrent use.
func (s *Stdio) TrySendGen(gen uint64, msg []byte) error {
	if gen == 0 {
		return ErrNotRunning
	}
	return s.send(context.Background(), gen, msg, false)
}

// send queues msg for generation gen (0: any), waiting for room until ctx
// ends if block is set.
func (s *Stdio) send(ctx context.Context, gen uint64, msg []byte, block bool) error {
	s.mu.Lock()
	closed, p := s.closed, s.cur
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case p == nil, gen != 0 && p.gen != gen, p.stopped():
		// stopped: its writer quit (it is being stopped or killed), so
		// nothing queued now would be written.
		return ErrNotRunning
	}
	b := buffers.Get(len(msg) + 1) // the writer gives it back once written
	if hasLineBreak(msg) {
		*b = jsonrpc.AppendCompact(*b, msg)
		if hasLineBreak(*b) {
			putBuf(b)
			return ErrNewline
		}
	} else {
		*b = append(*b, msg...)
	}
	*b = append(*b, '\n')
	select {
	case p.queue <- b:
		return nil
	default:
	}
	s.queueFull.Add(1)
	if !block {
		putBuf(b)
		return ErrQueueFull
	}
	select {
	case p.queue <- b:
		return nil
	case <-p.stopWrite:
		putBuf(b)
		if s.isClosed() {
			return ErrClosed
		}
		return ErrNotRunning
	case <-s.closing:
		putBuf(b)
		return ErrClosed
	case <-ctx.Done():
		putBuf(b)
		return ctx.Err()
	}
}

// lineBreaks are the bytes that may end a line for the server: '\n', and
// '\r' for servers that read stdin with universal newlines (Python's text
// mode splits "a\rb" into two lines).
const lineBreaks = "\n\r"

// hasLineBreak reports whether b holds a byte of lineBreaks (two vectorised
// scans: bytes.ContainsAny walks a large message byte by byte).
func hasLineBreak(b []byte) bool {
	return bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0
}

func (s *Stdio) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Restart kills generation gen now if it is the running process: its whole
// process group gets SIGKILL, Exited reports an *ExitError whose Reason is
// reason, and the supervisor restarts it with backoff (when cfg.Restart is
// set). Owners use it for a server that does not answer (a failed
// initialize, a liveness probe). It is a no-op for any other generation, and
// never blocks. Safe for concurrent use.
func (s *Stdio) Restart(gen uint64, reason string) {
	s.mu.Lock()
	p := s.cur
	s.mu.Unlock()
	if p == nil || p.gen != gen {
		return
	}
	if p.kill(reason, false) {
		s.killed.Add(1)
	}
}

// CanRestart reports true: Restart kills the generation, and the
// supervisor starts its successor when cfg.Restart is set.
func (s *Stdio) CanRestart() bool { return true }

// Served records that generation gen answered a client request: when it
// exits, the restart backoff starts again from MinBackoff. A no-op for a
// generation that is not the latest. Never blocks; safe for concurrent use.
func (s *Stdio) Served(gen uint64) {
	s.mu.Lock()
	p := s.last
	s.mu.Unlock()
	if p != nil && p.gen == gen {
		p.served.Store(true)
	}
}

// Generation returns the generation of the latest process (0 before the
// first) and whether it is running. Safe for concurrent use.
func (s *Stdio) Generation() (gen uint64, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.cur != nil
}

// PID returns the process id of the running process, 0 if none. It is also
// the id of the process group. Safe for concurrent use.
func (s *Stdio) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.pid
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (s *Stdio) Stats() Stats {
	gen, running := s.Generation()
	return Stats{
		Generation:         gen,
		Running:            running,
		Restarts:           s.restarts.Load(),
		SpawnFailures:      s.spawnFailures.Load(),
		Lines:              s.lines.Load(),
		OversizedLines:     s.oversized.Load(),
		Sent:               s.sent.Load(),
		Writes:             s.writes.Load(),
		QueueFull:          s.queueFull.Load(),
		Dropped:            s.dropped.Load(),
		Stuck:              s.stuck.Load(),
		Killed:             s.killed.Load(),
		StderrDroppedLines: s.stderrDroppedLines.Load(),
		StderrDroppedBytes: s.stderrDroppedBytes.Load(),
	}
}

// Done returns a channel that is closed when the Stdio stops supervising:
// after Close, or after the process exited (and Exited returned) when Restart
// is not set. Close must still be called to release everything.
func (s *Stdio) Done() <-chan struct{} { return s.done }

// Close stops the process the way the MCP specification asks (close stdin,
// wait StopGrace, SIGTERM to the process group, wait StopGrace, SIGKILL to
// the group), stops restarting, waits for every goroutine the Stdio started
// (so Exited has returned for every generation), and returns. Messages still
// queued are dropped. Close is idempotent and safe to call concurrently with
// Send and with itself, but not from a Handler method.
func (s *Stdio) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.closing)
	})
	<-s.done
	s.wg.Wait()
	return nil
}

// putBuf gives back a queued message's buffer (from buffers.Get in send).
func putBuf(b *[]byte) { buffers.Put(b) }

// Interface guard: the multiplexer takes a Stdio as its upstream.
var _ upstream.Upstream = (*Stdio)(nil)
