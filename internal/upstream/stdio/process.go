package stdio

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is one process generation.
type proc struct {
	// Static after startProc.
	s       *Stdio
	gen     uint64
	cmd     *exec.Cmd
	pid     int // also the process group id
	started time.Time
	queue   chan *[]byte  // Send -> writer
	kick    chan struct{} // capacity 1: a direct write left p.rest to the writer
	stdin   *os.File      // written under stdinMu; closed by closeStdin
	// stdinRaw is stdin's raw connection, and directWriteFn the method
	// value writeNow passes to it, both made once (stdin.go).
	stdinRaw      syscall.RawConn
	directWriteFn func(fd uintptr)
	stdout        *os.File // owned by the reader
	stderr        *os.File // owned by the stderr logger

	// stdinMu is held by whoever writes to stdin: the writer, for as long
	// as its write takes, or a sender for one non-blocking write(2)
	// (stdin.go). Senders only TryLock it, so none ever waits for the
	// child.
	stdinMu sync.Mutex
	// guarded by stdinMu:
	writeDeadline time.Time // stdin's write deadline as last set (the writer's)
	rest          *[]byte   // a direct write's message whose bytes from restOff are unwritten: the writer's first
	restOff       int
	directBuf     []byte // writeNow's arguments and results
	directN       int
	directErr     error
	// unwritten counts messages accepted and not yet written: queued, or a
	// direct write's rest. A sender adds its message before queueing it;
	// the writer subtracts what it wrote before it lets stdinMu go.
	unwritten atomic.Int64

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
		kick:      make(chan struct{}, 1),
		stdin:     inW,
		stdout:    outR,
		stderr:    errR,
		stopWrite: make(chan struct{}),
		exited:    make(chan struct{}),
		outDone:   make(chan struct{}),
		errDone:   make(chan struct{}),
		finished:  make(chan struct{}),
	}
	p.stdinRaw, _ = inW.SyscallConn() // fails only for a nil *os.File
	p.directWriteFn = p.directWrite
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
