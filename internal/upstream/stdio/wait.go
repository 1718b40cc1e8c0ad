package stdio

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"
)

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
	p.exitedAt = time.Now()
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

// Linux constants not in package syscall (the same on every architecture).
const (
	sysPidfdOpen = 434 // pidfd_open(2), Linux 5.3
	pPID         = 1   // waitid idtype P_PID
	pPIDFD       = 3   // waitid idtype P_PIDFD, Linux 5.4
)

// waitExitNoReap returns once process pid (our unreaped child) has exited,
// leaving it a zombie so that its pid and process group id cannot be reused
// while we may still signal them.
//
// It waits on a pidfd registered with Go's network poller, which parks only
// a goroutine: a blocking waitid would hold one OS thread per live child,
// and thousands of children (session mode) would exhaust the runtime's
// thread limit and crash the gateway. Only where pidfds are unavailable
// (kernels before 5.4, or a seccomp filter refusing them) does it fall back
// to the blocking waitid.
func waitExitNoReap(pid int) error {
	if waitPidfd(pid) == nil {
		return nil
	}
	// No pidfd here (old kernel, seccomp), or none now (out of file
	// descriptors): wait the blocking way. Treating the failure as an exit
	// would kill a healthy child.
	return waitBlocking(pid)
}

// errNoPidfd: the kernel cannot provide or wait on a pidfd.
var errNoPidfd = errors.New("pidfd unavailable")

// pidfdOpen is pidfd_open(pid, 0); a variable so that tests can make it fail.
var pidfdOpen = func(pid int) (uintptr, syscall.Errno) {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	return fd, errno
}

// waitPidfd waits for pid's exit through a pidfd; errNoPidfd if the kernel
// cannot provide or wait on one.
func waitPidfd(pid int) error {
	fd, errno := pidfdOpen(pid)
	switch errno {
	case 0:
	case syscall.ENOSYS, syscall.EPERM, syscall.EINVAL:
		return errNoPidfd
	default:
		return os.NewSyscallError("pidfd_open", errno)
	}
	// Non-blocking before os.NewFile, so that the file is put in the poller.
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		syscall.Close(int(fd))
		return os.NewSyscallError("setnonblock", err)
	}
	f := os.NewFile(fd, "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	// A pidfd becomes readable when the process exits. Read calls the
	// function, and while it returns false parks until the poller reports
	// the fd readable, then calls it again.
	err = rc.Read(func(fd uintptr) bool {
		exited, err := waitNoHang(int(fd))
		if err != nil {
			werr = err
			return true
		}
		return exited
	})
	if err == nil {
		err = werr
	}
	if errors.Is(err, syscall.EINVAL) {
		// pidfd_open exists (5.3) but waitid does not know P_PIDFD (5.4).
		return errNoPidfd
	}
	return err
}

// waitNoHang reports whether the process behind pidfd has exited, without
// reaping it or blocking.
func waitNoHang(pidfd int) (bool, error) {
	var info [128]byte // siginfo_t; si_signo (offset 0) is SIGCHLD once it exited
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPIDFD, uintptr(pidfd),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT|syscall.WNOHANG, 0, 0)
		switch errno {
		case 0:
			return *(*int32)(unsafe.Pointer(&info[0])) != 0, nil
		case syscall.EINTR:
			continue
		default:
			return false, errno
		}
	}
}

// waitBlocking is waitid(P_PID, pid, WEXITED|WNOWAIT), retried on EINTR.
// It holds an OS thread until the process exits.
func waitBlocking(pid int) error {
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

// leaderExited reports whether our unreaped child pid has exited, without
// reaping it or blocking (waitid P_PID with WNOHANG|WNOWAIT).
func leaderExited(pid int) bool {
	var info [128]byte // siginfo_t; si_signo (offset 0) is SIGCHLD once it exited
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT|syscall.WNOHANG, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		return errno == 0 && *(*int32)(unsafe.Pointer(&info[0])) != 0
	}
}
