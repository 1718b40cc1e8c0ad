package echoserver

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// MaxLineBytes is the longest message line ServeStdio reads; a longer line
// gets a parse error reply and is skipped.
const MaxLineBytes = 16 << 20

// keepLineBytes is the largest buffer for gathering long lines kept from one
// line to the next: enough for a 1 MiB message and its envelope, so a run
// of large messages does not allocate one per line.
const keepLineBytes = 4 << 20

// flushBytes bounds the replies the reader batches before handing them to
// the writer even while more input is buffered.
const flushBytes = 64 << 10

// ServeStdio answers newline-delimited JSON-RPC messages from in on out
// until in ends, then returns once every reply is written. It returns the
// first read or write error (io.EOF is a clean end and returns nil). After
// a write error the remaining input is still read, and dropped.
//
// Replies are batched while more input is already buffered and written in
// one Write when the reader runs dry (or the batch passes 64 KiB), by a
// writer goroutine, so a slow consumer of out never stalls reading.
func ServeStdio(in io.Reader, out io.Writer) error {
	q := newOutQueue()
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { werr = q.run(out) })

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
			if batch, _, replied = AppendReply(batch, line); replied {
				batch = append(batch, '\n')
			}
		}
		if len(batch) > 0 && (br.Buffered() == 0 || len(batch) >= flushBytes || err != nil) {
			q.push(batch)
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
	q.close()
	wg.Wait()
	return errors.Join(rerr, werr)
}

// outQueue hands reply bytes from the reader to the writer without ever
// blocking the reader: it is unbounded, which is fine for a fixture whose
// every reply answers a request its peer chose to send.
type outQueue struct {
	mu     sync.Mutex
	buf    []byte // guarded by mu: replies not yet taken by the writer
	closed bool   // guarded by mu
	wake   chan struct{}
}

func newOutQueue() *outQueue { return &outQueue{wake: make(chan struct{}, 1)} }

func (q *outQueue) push(b []byte) {
	q.mu.Lock()
	q.buf = append(q.buf, b...)
	q.mu.Unlock()
	q.signal()
}

func (q *outQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run writes everything pushed until the queue is closed and drained. After
// a write error it discards output and returns that error at the end.
func (q *outQueue) run(out io.Writer) error {
	var spare []byte
	var werr error
	for range q.wake {
		for {
			q.mu.Lock()
			b, closed := q.buf, q.closed
			q.buf = spare[:0]
			q.mu.Unlock()
			if len(b) == 0 {
				spare = b
				if closed {
					return werr
				}
				break
			}
			if werr == nil {
				_, werr = out.Write(b)
			}
			spare = b
		}
	}
	return werr
}
