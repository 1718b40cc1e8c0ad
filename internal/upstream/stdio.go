package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by Stdio.
var (
	// ErrNotRunning is returned by Send when no process is up: between a
	// crash and the restart, or for good after an exit without Restart.
	ErrNotRunning = errors.New("upstream: server process is not running")
	// ErrClosed is returned by Send after Close.
	ErrClosed = errors.New("upstream: closed")
	// ErrNewline is returned by Send for a message that contains a newline,
	// which would split it into two on the wire.
	ErrNewline = errors.New("upstream: message contains a newline")
	// ErrExited is wrapped by the error passed to Handler.Exited for every
	// exit that Close did not ask for; errors.As finds the *exec.ExitError.
	ErrExited = errors.New("upstream: server process exited")
)

// Defaults for the zero values of StdioConfig fields.
const (
	DefaultMaxLineBytes = 16 << 20
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
	DefaultStopGrace    = 2 * time.Second
)

// SendQueueLen is how many messages Send queues per process before it blocks
// (until the writer catches up, ctx ends, the process dies or Close).
const SendQueueLen = 1024

// OversizedPrefixLen is how much of an oversized line Handler.Oversized sees.
const OversizedPrefixLen = 4 << 10

// Handler receives what a Stdio reads. Its methods are called from the
// Stdio's single reader goroutine, one at a time, never concurrently, in the
// order Started, Line/Oversized..., Exited for each generation, generations in
// order. A method may call Send, Generation, PID and Stats, but must not call
// Close (Close waits for the goroutine that is calling it) and should return
// quickly: while it runs, the child's stdout is not read.
type Handler interface {
	// Started is called after process generation gen (1, 2, ... counting
	// restarts) started, before any of its lines is delivered. Send already
	// reaches gen when Started is called.
	Started(gen uint64)
	// Line is called for each non-empty stdout line (without the newline).
	// line is valid only during the call.
	Line(gen uint64, line []byte)
	// Oversized is called instead of Line for a line longer than
	// MaxLineBytes: prefix is its first 4 KiB (valid during the call), size
	// its total length. The rest of the line is discarded.
	Oversized(gen uint64, prefix []byte, size int)
	// Exited is called once per generation after the process exited and all
	// its stdout lines were delivered; err describes the exit (nil after a
	// clean stop by Close, else it wraps ErrExited). By the time Exited is
	// called, Send no longer reaches gen.
	Exited(gen uint64, err error)
}

// StdioConfig configures a Stdio. Only Command is required.
type StdioConfig struct {
	Name    string   // server name, for logs
	Command string   // program, looked up in PATH if it has no slash
	Args    []string // arguments after the program name
	Env     []string // appended to os.Environ() (a later KEY= wins)
	Dir     string   // working directory; "" is the gateway's

	// MaxLineBytes bounds one stdout line; longer lines go to
	// Handler.Oversized. Default 16 MiB.
	MaxLineBytes int

	// Restart restarts the server after an exit that Close did not ask for.
	// The n-th consecutive restart waits a random time in [d/2, d] with
	// d = min(MinBackoff*2^n, MaxBackoff) ("equal jitter": restarts spread
	// out, yet never come sooner than half the nominal delay). The count n
	// resets to 0 when the process that exited had run for at least
	// 10*MinBackoff. A failed spawn counts as a failed run and is retried the
	// same way until Close.
	Restart    bool
	MinBackoff time.Duration // default 100ms
	MaxBackoff time.Duration // default 30s

	// StopGrace is how long Close waits after closing stdin before sending
	// SIGTERM to the process group, and again before SIGKILL. It also bounds
	// how long stdout may stay open after the leader exited. Default 2s.
	StopGrace time.Duration

	// Logger receives lifecycle events and the child's stderr (each line at
	// info, with server=Name, stream="stderr", pid). Default slog.Default().
	Logger *slog.Logger
}

// Stats are counters of a Stdio since it started.
type Stats struct {
	Generation     uint64 // generation of the latest process
	Running        bool   // whether a process is up now
	Restarts       uint64 // processes started after the first
	SpawnFailures  uint64 // restarts that could not start the command
	Lines          uint64 // stdout lines delivered to Handler.Line
	OversizedLines uint64 // stdout lines delivered to Handler.Oversized
	Sent           uint64 // messages written to stdin
	Writes         uint64 // write calls on stdin (Sent/Writes = coalescing)
	QueueFull      uint64 // Sends that found the queue full and had to wait
	Dropped        uint64 // queued messages discarded because their process ended
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
	gen    uint64 // generation of the latest process
	closed bool

	restarts, spawnFailures, lines, oversized atomic.Uint64
	sent, writes, queueFull, dropped          atomic.Uint64
}

// StartStdio starts the first process. It returns an error if the command
// cannot be started at all (not found, not executable): callers report that
// as a configuration or startup problem. After that the Stdio supervises the
// process, restarting it when cfg.Restart is set, until Close.
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
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
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
		return nil, fmt.Errorf("upstream %s: start %s: %w", cfg.Name, cfg.Command, err)
	}
	s.wg.Add(1)
	go s.supervise(p)
	return s, nil
}

// Send queues one message (without its newline; Send adds it) for the stdin
// of the current process. It copies msg, so the caller may reuse it at once.
// A nil error means queued, not delivered: a message still queued when its
// process dies is dropped and counted (the Handler's Exited already tells the
// owner). Send blocks only while the queue of SendQueueLen messages is full,
// and returns ErrNotRunning when no process is up, ErrClosed after Close,
// ErrNewline for a message containing '\n', and ctx.Err() if ctx ends while
// the queue is full. Safe for concurrent use, including with Close.
func (s *Stdio) Send(ctx context.Context, msg []byte) error {
	return s.send(ctx, 0, msg)
}

// SendGen is Send restricted to generation gen: it returns ErrNotRunning
// unless gen is the running process. Owners use it for messages that belong
// to one process, such as replies to its server-to-client requests, which
// must not reach a restarted successor.
func (s *Stdio) SendGen(ctx context.Context, gen uint64, msg []byte) error {
	if gen == 0 {
		return ErrNotRunning
	}
	return s.send(ctx, gen, msg)
}

func (s *Stdio) send(ctx context.Context, gen uint64, msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		return ErrNewline
	}
	s.mu.Lock()
	closed, p := s.closed, s.cur
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case p == nil, gen != 0 && p.gen != gen:
		return ErrNotRunning
	}
	b := getBuf()
	*b = append(append(*b, msg...), '\n')
	select {
	case p.queue <- b:
		return nil
	default:
	}
	s.queueFull.Add(1)
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

func (s *Stdio) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
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
		Generation:     gen,
		Running:        running,
		Restarts:       s.restarts.Load(),
		SpawnFailures:  s.spawnFailures.Load(),
		Lines:          s.lines.Load(),
		OversizedLines: s.oversized.Load(),
		Sent:           s.sent.Load(),
		Writes:         s.writes.Load(),
		QueueFull:      s.queueFull.Load(),
		Dropped:        s.dropped.Load(),
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

// Buffers for queued messages. Big ones are not kept: one 5 MiB message must
// not pin 5 MiB per pooled slot.
const maxPooledBuf = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}
