package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// coalesceBytes bounds how much the writer gathers from the queue into one
// write to stdin.
const coalesceBytes = 64 << 10

// proc is one process generation.
type proc struct {
	// Static after startProc.
	s       *Stdio
	gen     uint64
	cmd     *exec.Cmd
	pid     int // also the process group id
	started time.Time
	queue   chan *[]byte // Send -> writer
	stdin   *os.File     // owned by the writer; closed by closeStdin
	stdout  *os.File     // owned by the reader
	stderr  *os.File     // owned by the stderr logger

	stdinOnce sync.Once
	stopWrite chan struct{} // closed by closeStdin: the writer must quit
	exited    chan struct{} // closed by the waiter: leader exited, group killed
	outDone   chan struct{} // closed by the reader at stdout EOF
	errDone   chan struct{} // closed by the stderr logger at EOF
	finished  chan struct{} // closed by the reader after Handler.Exited returned
	stopping  atomic.Bool   // Close asked this process to stop

	sigMu  sync.Mutex
	reaped bool // guarded by sigMu: the leader was reaped, its pgid may be reused
}

// startProc spawns the next generation, publishes it for Send and starts its
// goroutines. Only StartStdio and the supervisor call it, never concurrently.
func (s *Stdio) startProc() (*proc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = append(os.Environ(), s.cfg.Env...)
	cmd.Dir = s.cfg.Dir
	// *os.File streams: exec starts no copying goroutines and Wait closes
	// nothing of ours, so reading and reaping are ordered by us alone.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// Pdeathsig fires when the thread that forked exits, not only the
	// process (golang/go#27505). Go ends a thread only when a goroutine
	// locked to it exits still locked, which nothing in mcpgate does, so in
	// practice it fires when the gateway dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	closeAll(inR, outW, errW) // the child holds its own copies
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, err
	}
	p := &proc{
		s:         s,
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		started:   time.Now(),
		queue:     make(chan *[]byte, SendQueueLen),
		stdin:     inW,
		stdout:    outR,
		stderr:    errR,
		stopWrite: make(chan struct{}),
		exited:    make(chan struct{}),
		outDone:   make(chan struct{}),
		errDone:   make(chan struct{}),
		finished:  make(chan struct{}),
	}
	s.mu.Lock()
	s.gen++
	p.gen = s.gen
	if !s.closed {
		s.cur = p
	}
	s.mu.Unlock()
	s.log.Info("upstream started", "pid", p.pid, "gen", p.gen)

	s.wg.Add(4)
	go p.readLoop()
	go p.writeLoop()
	go p.stderrLoop()
	go p.waitLoop()
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// closeStdin tells the child no more input comes and stops the writer. A
// Write blocked on a full pipe returns at once: the pipe is in Go's poller.
func (p *proc) closeStdin() {
	p.stdinOnce.Do(func() {
		close(p.stopWrite)
		p.stdin.Close()
	})
}

// signal sends sig to the whole process group unless the leader was reaped
// (then the group id may belong to someone else).
func (p *proc) signal(sig syscall.Signal) {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if p.reaped {
		return
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.s.log.Warn("upstream signal failed", "pid", p.pid, "signal", sig.String(), "err", err)
	}
}

// writeLoop is the only writer of stdin. It gathers what is queued into one
// write, and on any end (stop, write error) drops and counts the rest.
func (p *proc) writeLoop() {
	s := p.s
	defer s.wg.Done()
	var batch []*[]byte
	var wbuf []byte
	for {
		select {
		case b := <-p.queue:
			batch = append(batch[:0], b)
		case <-p.stopWrite:
			p.dropQueued()
			return
		}
		size := len(*batch[0])
	gather:
		for size < coalesceBytes {
			select {
			case b := <-p.queue:
				batch = append(batch, b)
				size += len(*b)
			default:
				break gather
			}
		}
		out := *batch[0]
		if len(batch) > 1 {
			wbuf = wbuf[:0]
			for _, b := range batch {
				wbuf = append(wbuf, *b...)
			}
			out = wbuf
		}
		_, err := p.stdin.Write(out)
		for i, b := range batch {
			putBuf(b)
			batch[i] = nil
		}
		if cap(wbuf) > 4*coalesceBytes {
			wbuf = nil // a burst of big messages must not pin memory
		}
		if err != nil {
			s.dropped.Add(uint64(len(batch)))
			select {
			case <-p.stopWrite: // we closed it: nothing to report
			default:
				s.log.Warn("upstream stdin write failed", "pid", p.pid, "err", err)
			}
			p.closeStdin()
			p.dropQueued()
			return
		}
		s.sent.Add(uint64(len(batch)))
		s.writes.Add(1)
	}
}

// dropQueued discards what is queued now. Sends that slip in later find the
// process unpublished or stopWrite closed, or are collected with the channel.
func (p *proc) dropQueued() {
	for {
		select {
		case b := <-p.queue:
			putBuf(b)
			p.s.dropped.Add(1)
		default:
			return
		}
	}
}

// waitLoop waits for the leader to exit without reaping it, unpublishes the
// process, kills what is left of its group, and gives stdout and stderr
// StopGrace to reach EOF before closing them (a descendant that left the
// group could otherwise hold them open forever).
func (p *proc) waitLoop() {
	s := p.s
	defer s.wg.Done()
	if err := waitExitNoReap(p.pid); err != nil {
		s.log.Error("upstream waitid failed; killing the group", "pid", p.pid, "err", err)
	}
	s.mu.Lock()
	if s.cur == p {
		s.cur = nil
	}
	s.mu.Unlock()
	p.signal(syscall.SIGKILL)
	p.closeStdin()
	close(p.exited)

	deadline := time.NewTimer(s.cfg.StopGrace)
	defer deadline.Stop()
	for _, ch := range []chan struct{}{p.outDone, p.errDone} {
		select {
		case <-ch:
		case <-deadline.C:
			s.log.Warn("upstream output still open after exit; closing it", "pid", p.pid)
			closeAll(p.stdout, p.stderr)
			return
		}
	}
}

// waitExitNoReap blocks until process pid has exited, leaving it a zombie:
// waitid(P_PID, pid, WEXITED|WNOWAIT).
func waitExitNoReap(pid int) error {
	const pPID = 1
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

// readLoop is the only reader of stdout and the only caller of the Handler
// for this generation.
func (p *proc) readLoop() {
	s := p.s
	defer s.wg.Done()
	defer close(p.finished)

	s.h.Started(p.gen)
	lr := newLineReader(p.stdout, s.cfg.MaxLineBytes)
	for {
		line, size, over, err := lr.next()
		if err != nil {
			break
		}
		if over {
			s.oversized.Add(1)
			s.log.Warn("upstream line too long; skipped", "pid", p.pid, "bytes", size, "max", s.cfg.MaxLineBytes)
			s.h.Oversized(p.gen, line, size)
			continue
		}
		s.lines.Add(1)
		s.h.Line(p.gen, line)
	}
	close(p.outDone)

	<-p.exited
	<-p.errDone
	p.sigMu.Lock()
	p.reaped = true
	p.sigMu.Unlock()
	werr := p.cmd.Wait()
	closeAll(p.stdout, p.stderr)

	var err error
	switch {
	case p.stopping.Load():
		s.log.Info("upstream stopped", "pid", p.pid, "gen", p.gen, "status", exitStatus(werr))
	case werr == nil:
		err = fmt.Errorf("%w with status 0", ErrExited)
	default:
		err = fmt.Errorf("%w: %w", ErrExited, werr)
	}
	if err != nil {
		s.log.Warn("upstream exited", "pid", p.pid, "gen", p.gen, "status", exitStatus(werr),
			"uptime", time.Since(p.started).Round(time.Millisecond))
	}
	s.h.Exited(p.gen, err)
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// stderrLoop logs each stderr line at info.
func (p *proc) stderrLoop() {
	s := p.s
	defer s.wg.Done()
	defer close(p.errDone)
	lr := newLineReader(p.stderr, stderrMaxLine)
	for {
		line, size, over, err := lr.next()
		if err != nil {
			return
		}
		attrs := []slog.Attr{slog.String("stream", "stderr"), slog.Int("pid", p.pid)}
		if over {
			attrs = append(attrs, slog.Int("truncated_from", size))
		}
		s.log.LogAttrs(context.Background(), slog.LevelInfo, string(line), attrs...)
	}
}

// stderrMaxLine bounds a logged stderr line; the rest is cut.
const stderrMaxLine = OversizedPrefixLen

// stop ends the process as the MCP specification asks: close stdin, wait
// StopGrace, SIGTERM the group, wait StopGrace, SIGKILL the group. It returns
// once the leader exited; the reader then finishes on its own.
func (p *proc) stop() {
	s := p.s
	select {
	case <-p.exited:
		return // it exited on its own; Exited reports that
	default:
	}
	p.stopping.Store(true)
	p.closeStdin()
	grace := time.NewTimer(s.cfg.StopGrace)
	defer grace.Stop()
	select {
	case <-p.exited:
		return
	case <-grace.C:
	}
	s.log.Warn("upstream did not exit after stdin closed; sending SIGTERM", "pid", p.pid, "grace", s.cfg.StopGrace)
	p.signal(syscall.SIGTERM)
	grace.Reset(s.cfg.StopGrace)
	select {
	case <-p.exited:
		return
	case <-grace.C:
	}
	s.log.Warn("upstream ignored SIGTERM; sending SIGKILL", "pid", p.pid)
	p.signal(syscall.SIGKILL)
	<-p.exited
}
