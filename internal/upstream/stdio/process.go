package stdio

import (
	"errors"
	"fmt"
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
	// writeDeadline is stdin's write deadline as last set (writer only).
	writeDeadline time.Time
	stdout        *os.File // owned by the reader
	stderr        *os.File // owned by the stderr logger

	stdinOnce sync.Once
	stopWrite chan struct{} // closed by closeStdin: the writer must quit
	exited    chan struct{} // closed by the waiter: leader exited, group killed
	outDone   chan struct{} // closed by the reader at stdout EOF
	errDone   chan struct{} // closed by the stderr logger at EOF
	finished  chan struct{} // closed by the reader after Handler.Exited returned
	stopping  atomic.Bool   // Close asked this process to stop
	served    atomic.Bool   // Stdio.Served was called for this generation

	exitedAt time.Time  // written by the waiter before exited is closed
	tail     stderrTail // written by the stderr logger, read after errDone
	exitErr  error      // written by the reader before finished is closed

	sigMu  sync.Mutex
	reaped bool // guarded by sigMu: the leader was reaped, its pgid may be reused
	// guarded by sigMu: why the gateway killed the process ("" if it did
	// not); the first reason wins.
	killReason string
	stuck      bool // guarded by sigMu: killReason is the stuck rule
}

// startProc spawns the next generation, publishes it for Send and starts its
// goroutines. Only StartStdio and the supervisor call it, never concurrently.
// Its error wraps ErrSpawn.
func (s *Stdio) startProc() (*proc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, newSpawnError(s.cfg.Command, s.cfg.Dir, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, newSpawnError(s.cfg.Command, s.cfg.Dir, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, newSpawnError(s.cfg.Command, s.cfg.Dir, err)
	}
	if n := s.cfg.PipeBytes; n > 0 {
		setPipeSize(inW, n)
		setPipeSize(outR, n)
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = s.cfg.Env // nil: exec inherits os.Environ()
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
		return nil, newSpawnError(s.cfg.Command, s.cfg.Dir, err)
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
	s.last = p
	if !s.closed {
		s.cur = p
	}
	s.mu.Unlock()
	register(p)
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
	p.signalLocked(sig)
}

func (p *proc) signalLocked(sig syscall.Signal) {
	if p.reaped {
		return
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.s.log.Warn("upstream signal failed", "pid", p.pid, "signal", sig.String(), "err", err)
	}
}

// kill sends SIGKILL to the process group now and records why, for the
// ExitError. It reports whether this call killed it: false if the process
// was already being killed by the gateway or has exited. Never blocks on
// the child.
func (p *proc) kill(reason string, stuck bool) bool {
	select {
	case <-p.exited:
		return false
	default:
	}
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	// The leader may have exited on its own a moment ago, before its waiter
	// noticed: then its exit is its own, not the gateway's doing.
	if p.reaped || p.killReason != "" || leaderExited(p.pid) {
		return false
	}
	p.killReason, p.stuck = reason, stuck
	p.s.log.Warn("upstream killed", "pid", p.pid, "gen", p.gen, "reason", reason)
	p.signalLocked(syscall.SIGKILL)
	return true
}

// writeLoop is the only writer of stdin. It gathers what is queued into one
// write, and on any end (stop, write error, stuck) drops and counts the rest.
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
		err := p.write(out)
		for i, b := range batch {
			putBuf(b)
			batch[i] = nil
		}
		if cap(wbuf) > 4*coalesceBytes {
			wbuf = nil // a burst of big messages must not pin memory
		}
		if err != nil {
			s.dropped.Add(uint64(len(batch)))
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				if p.kill(fmt.Sprintf("stuck: stdin not read for %v", s.cfg.StuckTimeout), true) {
					s.stuck.Add(1)
				}
			case p.stopped():
				// We closed it: nothing to report.
			default:
				// The child closed its stdin (EPIPE) but may run on: it can
				// never get another message, so it must not stay published
				// for Send with its callers waiting on it.
				reason := "stdin closed by the server"
				if !errors.Is(err, syscall.EPIPE) {
					reason = "stdin write failed: " + err.Error()
				}
				if p.kill(reason, false) {
					s.killed.Add(1)
				}
			}
			p.closeStdin()
			p.dropQueued()
			return
		}
		s.sent.Add(uint64(len(batch)))
		s.writes.Add(1)
	}
}

// stuckTicks is how many times per StuckTimeout a blocked write checks for
// progress: the stuck kill comes at most StuckTimeout/stuckTicks late.
const stuckTicks = 8

// write writes out to stdin. The child is stuck when it took no byte from
// the pipe for StuckTimeout (os.ErrDeadlineExceeded): a slow reader of a
// big message is not stuck, a child that reads nothing is. Progress is
// checked every StuckTimeout/stuckTicks by how many bytes the pipe holds,
// not by whether a write went through: bytes that filled the pipe's free
// room are no sign of a reader, and a pipe gains room only a page at a
// time, so a child reading short lines slowly could leave the writer
// blocked for long while it does read.
//
// The common write goes straight through: it costs one write system call.
// The deadline that bounds a blocked write is set again only when less than
// half a tick of it is left, and the pipe is first measured when a write
// has blocked for a tick: the bytes of that first tick count as progress
// (the fill level before the write is not known), so a stuck child is
// killed at most one tick late, never early.
func (p *proc) write(out []byte) error {
	stuckAfter := p.s.cfg.StuckTimeout
	tick := max(stuckAfter/stuckTicks, time.Millisecond)
	now := time.Now()
	if p.writeDeadline.Sub(now) < tick/2 {
		p.writeDeadline = now.Add(tick)
		if err := p.stdin.SetWriteDeadline(p.writeDeadline); err != nil {
			return err
		}
	}
	n, err := p.stdin.Write(out)
	if err == nil || n == len(out) {
		return nil
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	out = out[n:]
	lastProgress := time.Now()
	if n == 0 {
		lastProgress = now // nothing went in: no sign of a reader
	}
	before, known := pipeUnread(p.stdin)
	for {
		deadline := time.Now().Add(tick)
		if stuck := lastProgress.Add(stuckAfter); stuck.Before(deadline) {
			deadline = stuck
		}
		p.writeDeadline = deadline
		if err := p.stdin.SetWriteDeadline(deadline); err != nil {
			return err
		}
		n, err := p.stdin.Write(out)
		out = out[n:]
		if err == nil || len(out) == 0 {
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		now := time.Now()
		after, ok := pipeUnread(p.stdin)
		took := n > 0 // without a count, any write is the best sign there is
		if known && ok {
			took = after < before+n
		}
		before, known = after, ok
		if took {
			lastProgress = now
		} else if now.Sub(lastProgress) >= stuckAfter {
			return err
		}
	}
}

// fSetPipeSize is Linux's F_SETPIPE_SZ (F_LINUX_SPECIFIC_BASE + 7).
const fSetPipeSize = 1031

// setPipeSize asks for a pipe capacity of n bytes. It is best effort: a
// refusal (over the system's limit) leaves the capacity the pipe has.
func setPipeSize(f *os.File, n int) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, uintptr(n))
		})
	}
}

// pipeUnread returns how many bytes written to the pipe f have not been
// read yet (FIONREAD works on either end of a Linux pipe).
func pipeUnread(f *os.File) (int, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return 0, false
	}
	return int(n), true
}

func (p *proc) stopped() bool {
	select {
	case <-p.stopWrite:
		return true
	default:
		return false
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

// readLoop is the only reader of stdout and the only caller of the Handler
// for this generation. It never waits for the writer, so a child that
// floods stdout while not reading stdin is still read, unless the Handler
// itself blocks; the stuck rule then ends the cycle.
func (p *proc) readLoop() {
	s := p.s
	defer s.wg.Done()
	defer close(p.finished)

	s.h.Started(p.gen)
	lr := newLineReader(p.stdout, readBufSize, s.cfg.MaxLineBytes)
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
	reason, stuck := p.killReason, p.stuck
	p.sigMu.Unlock()
	werr := p.cmd.Wait()
	unregister(p)
	closeAll(p.stdout, p.stderr)

	uptime := p.exitedAt.Sub(p.started)
	if p.stopping.Load() && reason == "" {
		s.log.Info("upstream stopped", "pid", p.pid, "gen", p.gen, "status", exitStatus(werr))
	} else {
		ee := &ExitError{
			Status: exitStatus(werr),
			Uptime: uptime,
			Stderr: p.tail.lines(),
			Cause:  p.tail.cause(),
			Reason: reason,
			Stuck:  stuck,
		}
		var xe *exec.ExitError
		if errors.As(werr, &xe) {
			ee.err = xe
		}
		p.exitErr = ee
		s.recent.exited(ee)
		// The Handler logs the exit once, with the ExitError (status,
		// uptime, reason, stderr tail) and what the exit failed; here only
		// what it cannot know.
		s.log.Debug("upstream exited", "pid", p.pid, "gen", p.gen, "status", ee.Status)
	}
	s.h.Exited(p.gen, p.exitErr)
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

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
	// Routine for servers that run on after stdin EOF (node keeps running
	// while it has handles open): the SIGTERM the specification provides
	// for is the way they stop. Only ignoring it deserves a warning.
	s.log.Info("upstream did not exit after stdin closed; sending SIGTERM", "pid", p.pid, "grace", s.cfg.StopGrace)
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
