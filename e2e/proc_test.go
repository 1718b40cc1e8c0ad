package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// process is a child process of a test whose stdout and stderr go, line by line, to t.Log.
// It runs in its own process group so that a forced stop reaches its children too.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *os.File // read end of the pipe holding the child's stdout and stderr

	exited  chan struct{} // closed once cmd.Wait has returned
	waitErr error         // cmd.Wait's result; read only after exited is closed
	logged  chan struct{} // closed once the output copier has returned
}

// startProcess starts cmd, logging its output as name. onLine, if not nil, sees every output
// line, on the copier goroutine. The caller stops the process with stop, usually from
// t.Cleanup.
func startProcess(t testing.TB, name string, cmd *exec.Cmd, onLine func(string)) *process {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	// Only the child (and whatever it passes the pipe on to) holds the write end now, so the
	// copier sees EOF exactly when the last holder exits.
	w.Close()
	p := &process{name: name, cmd: cmd, out: r, exited: make(chan struct{}), logged: make(chan struct{})}
	go func() {
		defer close(p.logged)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line = strings.TrimRight(line, "\r\n"); line != "" {
				t.Logf("%s: %s", name, line)
				if onLine != nil {
					onLine(line)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// stop sends sig and waits up to grace for the process to exit, then kills its process group.
// With clean set, it reports an error unless the process exited with status 0 and, within a
// few seconds of that, nothing is left holding its output pipe: a holder would be a child
// process that outlived its owner (DESIGN.md invariant 4).
func (p *process) stop(t testing.TB, sig syscall.Signal, grace time.Duration, clean bool) {
	t.Helper()
	pgid := p.cmd.Process.Pid
	select {
	case <-p.exited:
		if clean {
			t.Errorf("%s exited before it was stopped: %v", p.name, p.waitErr)
			clean = false
		}
	default:
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.exited:
		case <-time.After(grace):
			t.Errorf("%s did not exit within %v of signal %d (%v); killing it", p.name, grace, int(sig), sig)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
			clean = false
		}
	}
	if clean && p.waitErr != nil {
		t.Errorf("%s exited with %v after signal %d (%v), want exit status 0", p.name, p.waitErr, int(sig), sig)
	}

	select {
	case <-p.logged:
	case <-time.After(5 * time.Second):
		if clean {
			t.Errorf("%s's output pipe is still open 5s after it exited: a child process outlived it", p.name)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		p.out.Close() // unblocks the copier's read
		<-p.logged
	}
	p.out.Close()
	// Sweep stragglers left in the group, so that a failing test leaks nothing into the next.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// waitListening waits until addr accepts TCP connections, failing if p
// exits first.
func waitListening(t testing.TB, p *process, addr string) {
	t.Helper()
	testkit.WaitListening(t, p.name, addr, func() (bool, error) {
		select {
		case <-p.exited:
			return true, p.waitErr
		default:
			return false, nil
		}
	})
}

// runNode runs a Node script with node22 in dir, giving up after timeout, and returns its
// stdout. Its stderr goes to t.Log as it arrives. The returned error is the script's exit error.
// The timeout is cut short to end well before the go test -timeout, so that a hung peer gives a
// report with its output rather than a panic.
func runNode(t *testing.T, dir string, timeout time.Duration, args ...string) (stdout string, err error) {
	t.Helper()
	if d, ok := t.Deadline(); ok {
		timeout = max(min(timeout, time.Until(d)-30*time.Second), time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node22, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	cmd.WaitDelay = 5 * time.Second
	var out strings.Builder
	cmd.Stdout = &out
	stderr, perr := cmd.StderrPipe()
	if perr != nil {
		t.Fatal(perr)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting node %v: %v", args, err)
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		t.Logf("node: %s", sc.Text())
	}
	_, _ = io.Copy(io.Discard, stderr)
	err = cmd.Wait()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = errors.Join(err, ctx.Err())
	}
	return out.String(), err
}
