package echoserver

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
	"syscall"
)

// MaxLineBytes is the longest message line ServeStdio reads; a longer line
// gets a parse error reply and is skipped.
const MaxLineBytes = 16 << 20

// keepLineBytes is the largest buffer for gathering long lines kept from one
// line to the next: enough for a 1 MiB message and its envelope, so a run
// of large messages does not allocate one per line.
const keepLineBytes = 4 << 20

// flushBytes bounds the replies the reader batches before writing them
// even while more input is buffered.
const flushBytes = 64 << 10

// ServeStdio answers newline-delimited JSON-RPC messages from in on out
// until in ends, then returns once every reply is written. It returns the
// first read or write error (io.EOF is a clean end and returns nil). After
// a write error the remaining input is still read, and dropped.
//
// Replies are batched while more input is already buffered and written in
// one Write when the reader runs dry (or the batch passes 64 KiB), so a
// burst of requests costs one write. Reading never waits on out: if out is
// a syscall.Conn whose descriptor is in non-blocking mode (an os.Pipe, a
// net.Conn, or an os.File made from a descriptor set non-blocking), the
// reading goroutine writes each batch itself, in a system call that takes
// what the pipe or socket has room for, and queues only the rest. Anything
// queued, and every batch for any other out, is written by a writer
// goroutine that ServeStdio owns and waits for.
//
// The direct write is what makes the fixture cheap: a call then wakes the
// process once, to read, answer and write on one thread, instead of also
// waking a writer (see cmd/mcpecho, which puts its stdin and stdout into
// Go's poller for this).
func ServeStdio(in io.Reader, out io.Writer) error { return ServeStdioWith(in, out, Options{}) }

// ServeStdioWith is ServeStdio with options.
func ServeStdioWith(in io.Reader, out io.Writer, o Options) error {
	w := newStdioWriter(out)
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { werr = w.run() })

	br := bufio.NewReaderSize(in, 64<<10)
	var batch, long []byte
	var rerr error
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it, up to the limit.
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				if len(long) <= MaxLineBytes {
					long = append(long, line...)
				}
			}
			line = long
			if len(line) > MaxLineBytes {
				batch = append(batch, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"line too long"}}`+"\n"...)
				line = nil
			}
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var replied bool
			if batch, _, replied = o.reply(batch, line, true); replied {
				batch = append(batch, '\n')
			}
		}
		if len(batch) > 0 && (br.Buffered() == 0 || len(batch) >= flushBytes || err != nil) {
			w.write(batch)
			batch = batch[:0]
		}
		if err != nil {
			if err != io.EOF {
				rerr = err
			}
			break
		}
		if cap(long) > keepLineBytes {
			long = nil // do not pin one huge line's buffer
		}
	}
	w.close()
	wg.Wait()
	return errors.Join(rerr, werr)
}

// stdioWriter writes replies to out in the order the reader produces them,
// never blocking the reader. Output belongs to the reader while the writer
// goroutine is idle (busy false) and to the writer goroutine from the
// moment the reader queues bytes until the queue is drained; only the
// reader sets busy and only the writer clears it, so the two never write at
// once and bytes never pass each other.
//
// The queue is unbounded, which is fine for a fixture whose every reply
// answers a request its peer chose to send.
type stdioWriter struct {
	// Static after construction.
	out  io.Writer
	raw  syscall.RawConn // out's descriptor if it is non-blocking, else nil
	wake chan struct{}   // one pending signal for the writer goroutine

	mu      sync.Mutex
	pending []byte // guarded by mu: bytes queued for the writer goroutine
	busy    bool   // guarded by mu: the writer goroutine owns output
	closed  bool   // guarded by mu: no more bytes will be queued
}

func newStdioWriter(out io.Writer) *stdioWriter {
	return &stdioWriter{out: out, raw: nonblockingConn(out), wake: make(chan struct{}, 1)}
}

// nonblockingConn returns out's raw descriptor if out has one in
// non-blocking mode: only then can a write be tried without waiting.
func nonblockingConn(out io.Writer) syscall.RawConn {
	sc, ok := out.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var flags uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	}); err != nil || errno != 0 || flags&syscall.O_NONBLOCK == 0 {
		return nil
	}
	return rc
}

// write is called by the reader only. It writes b directly when output is
// the reader's and queues what that write could not take (or all of b).
func (w *stdioWriter) write(b []byte) {
	if w.raw != nil {
		w.mu.Lock()
		busy := w.busy
		w.mu.Unlock()
		if !busy {
			b = b[w.tryWrite(b):]
			if len(b) == 0 {
				return
			}
		}
	}
	w.mu.Lock()
	w.pending = append(w.pending, b...)
	w.busy = true
	w.mu.Unlock()
	w.signal()
}

// tryWrite writes what out takes without waiting and returns how much that
// was. An error (EAGAIN aside) is not returned: the writer goroutine
// retries the rest with out.Write, which reports it in the way out's type
// does (an *os.File for descriptor 1 raises SIGPIPE on EPIPE).
func (w *stdioWriter) tryWrite(b []byte) int {
	n := 0
	_ = w.raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			if err == syscall.EINTR {
				continue
			}
			if err != nil || m <= 0 {
				break
			}
		}
		return true // never wait for room: that is the writer goroutine's job
	})
	return n
}

func (w *stdioWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
}

func (w *stdioWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes what is queued until the writer is closed and drained, then
// returns the first write error. After an error it keeps output (busy
// stays true) and discards what is queued.
func (w *stdioWriter) run() error {
	var spare []byte
	var werr error
	for range w.wake {
		for {
			w.mu.Lock()
			b, closed := w.pending, w.closed
			w.pending = spare[:0]
			if len(b) == 0 && werr == nil {
				w.busy = false
			}
			w.mu.Unlock()
			if len(b) == 0 {
				spare = b
				if closed {
					return werr
				}
				break
			}
			if werr == nil {
				_, werr = w.out.Write(b)
			}
			spare = b
		}
	}
	return werr
}
