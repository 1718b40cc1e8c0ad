package stdio

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// This file is the stdin side of a process: who writes a message, when,
// and what becomes of one that cannot be written.
//
// A sender writes its own message when stdin is free and no message
// accepted before it is still unwritten, which is the common case below
// saturation: one non-blocking write(2) on the sender's goroutine, with no
// hand-off to another goroutine and so no wakeup of one. Otherwise the
// message is queued for the writer goroutine, which gathers what is queued
// into one write: a burst still becomes few writes. No sender ever waits
// for the child: what a direct write cannot put in the pipe at once (the
// child reads slowly, or not at all) is left to the writer, the only one
// that waits for the pipe, under the stuck rule; a failed direct write is
// left to it too, so that a write failure is handled in one place.
//
// Order: a message is written only after every message whose Send returned
// before its own Send began. A direct write happens only while no accepted
// message is unwritten (proc.unwritten, read under stdinMu, which the
// writer holds until it has counted what it wrote), so it never overtakes
// one, and a direct write's unwritten tail is the writer's first bytes.

// coalesceBytes bounds how much the writer gathers from the queue into one
// write to stdin.
const coalesceBytes = 64 << 10

// errStdinClosed is writeDirect's answer when stdin was closed under it
// (the process is being stopped or was killed); send turns it into
// ErrClosed or ErrNotRunning.
var errStdinClosed = errors.New("stdin closed")

// writeDirect writes message b (newline included) to stdin from the
// sender's goroutine, if stdin is free and nothing accepted before b is
// unwritten. It reports whether it took b: if not, the caller queues it.
// With took, b is no longer the caller's and err is nil (written, or its
// tail handed to the writer) or errStdinClosed. Never blocks.
func (p *proc) writeDirect(b *[]byte) (took bool, err error) {
	if p.unwritten.Load() != 0 || !p.stdinMu.TryLock() {
		return false, nil
	}
	if p.unwritten.Load() != 0 {
		p.stdinMu.Unlock()
		return false, nil
	}
	s := p.s
	n, err := p.writeNow(*b)
	if err == errStdinClosed {
		p.stdinMu.Unlock()
		putBuf(b)
		return true, err
	}
	if n > 0 {
		s.writes.Add(1)
	}
	if err == nil && n == len(*b) {
		p.stdinMu.Unlock()
		putBuf(b)
		s.sent.Add(1)
		s.direct.Add(1)
		return true, nil
	}
	// The pipe is full (EAGAIN), took part of b, or the write failed: the
	// writer goes on from here, with the stuck rule for a full pipe and
	// its handling of a failed write (which fails again for it).
	p.rest, p.restOff = b, n
	p.unwritten.Add(1)
	p.stdinMu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return true, nil
}

// writeNow makes one non-blocking write(2) of b to stdin (again after
// EINTR) and returns how many bytes went in: fewer than len(b) with a nil
// error when the pipe is full. It returns errStdinClosed if stdin was
// closed. Called with stdinMu held; it uses the proc's direct* fields
// rather than a closure so that it allocates nothing.
func (p *proc) writeNow(b []byte) (int, error) {
	p.directBuf, p.directN, p.directErr = b, 0, nil
	if err := p.stdinRaw.Control(p.directWriteFn); err != nil {
		p.directBuf = nil
		return 0, errStdinClosed
	}
	n, err := p.directN, p.directErr
	p.directBuf, p.directErr = nil, nil
	return n, err
}

// directWrite is the body of writeNow's Control call (p.directWriteFn).
func (p *proc) directWrite(fd uintptr) {
	for {
		n, err := syscall.Write(int(fd), p.directBuf[p.directN:])
		if n > 0 {
			p.directN += n
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return
		case err != nil:
			p.directErr = err
			return
		case p.directN == len(p.directBuf) || n <= 0:
			return
		}
	}
}

// writeLoop writes what senders queued, and the tails of direct writes
// the pipe could not take at once. It gathers what is queued into one
// write, and on any end (stop, write error, stuck) drops and counts the
// rest.
func (p *proc) writeLoop() {
	s := p.s
	defer s.wg.Done()
	var batch []*[]byte
	var wbuf []byte
	for {
		select {
		case b := <-p.queue:
			batch = append(batch[:0], b)
		case <-p.kick:
			batch = batch[:0]
		case <-p.stopWrite:
			p.stdinMu.Lock()
			p.dropRest()
			p.stdinMu.Unlock()
			p.dropQueued()
			return
		}
		size := 0
		for _, b := range batch {
			size += len(*b)
		}
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
		p.stdinMu.Lock()
		var out []byte
		switch rest := p.restBytes(); {
		case len(batch) == 0 && rest == nil:
			p.stdinMu.Unlock() // a kick whose tail an earlier round wrote
			continue
		case len(batch) == 0:
			out = rest
		case len(batch) == 1 && rest == nil:
			out = *batch[0]
		default:
			wbuf = append(wbuf[:0], rest...)
			for _, b := range batch {
				wbuf = append(wbuf, *b...)
			}
			out = wbuf
		}
		msgs := len(batch)
		if p.rest != nil {
			msgs++
			putBuf(p.rest)
			p.rest = nil
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
			s.dropped.Add(uint64(msgs))
			p.writeFailed(err)
			// Closed before stdinMu goes: no direct write slips in after the
			// failure.
			p.closeStdin()
			p.stdinMu.Unlock()
			p.dropQueued()
			return
		}
		s.sent.Add(uint64(msgs))
		s.writes.Add(1)
		p.unwritten.Add(-int64(msgs))
		p.stdinMu.Unlock()
	}
}

// restBytes returns what a direct write left unwritten, nil if nothing.
// Called with stdinMu held.
func (p *proc) restBytes() []byte {
	if p.rest == nil {
		return nil
	}
	return (*p.rest)[p.restOff:]
}

// dropRest drops and counts a direct write's unwritten tail. Called with
// stdinMu held.
func (p *proc) dropRest() {
	if p.rest != nil {
		putBuf(p.rest)
		p.rest = nil
		p.s.dropped.Add(1)
	}
}

// writeFailed reports why a write to stdin failed: a stuck child is killed
// and counted, a child that closed its stdin (or whose pipe failed) is
// killed too, since it can never get another message and must not stay
// published for Send with its callers waiting on it.
func (p *proc) writeFailed(err error) {
	s := p.s
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		if p.kill(fmt.Sprintf("stuck: stdin not read for %v", s.cfg.StuckTimeout), true) {
			s.stuck.Add(1)
		}
	case p.stopped():
		// We closed it: nothing to report.
	default:
		reason := "stdin closed by the server"
		if !errors.Is(err, syscall.EPIPE) {
			reason = "stdin write failed: " + err.Error()
		}
		if p.kill(reason, false) {
			s.killed.Add(1)
		}
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
// killed at most one tick late, never early. Called by the writer with
// stdinMu held.
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
