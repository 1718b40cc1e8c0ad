package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// threads returns this process's OS thread count.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: in /proc/self/status")
	return 0
}

// isOurChild reports whether pid is still a child of this process (running
// or an unreaped zombie).
func isOurChild(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid())
}

// Waiting for a child parks a goroutine, not an OS thread: 200 live
// children cost far fewer than 200 threads (a blocking waitid each would
// exhaust the runtime's thread limit with thousands of them).
func TestManyChildrenFewThreads(t *testing.T) {
	const n = 200
	before := threads(t)
	cfg := fakeConfig(t, testkit.FakeOptions{})
	cfg.Command, cfg.Args = "sleep", []string{"1000"}
	cfg.StopGrace = 20 * time.Millisecond
	cfg.Logger = discardLogger()
	var all []*Stdio
	var pids []int
	defer func() {
		var wg sync.WaitGroup
		for _, s := range all {
			wg.Go(func() { s.Close() })
		}
		wg.Wait()
		for _, pid := range pids {
			if isOurChild(pid) {
				t.Errorf("child %d remains after Close", pid)
			}
		}
	}()
	for range n {
		s, err := StartStdio(cfg, newRecorder(t))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
		pids = append(pids, s.PID())
	}
	for _, pid := range pids {
		if !isOurChild(pid) {
			t.Fatalf("child %d is not running", pid)
		}
	}
	if after := threads(t); after-before > n/4 {
		t.Fatalf("%d threads for %d children (%d before)", after, n, before)
	} else {
		t.Logf("%d threads for %d children (%d before)", after, n, before)
	}
}

// The blocking fallback, for kernels without pidfds, still sees an exit
// without reaping the child.
func TestWaitBlockingFallback(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 7")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitBlocking(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if !isOurChild(cmd.Process.Pid) {
		t.Fatal("waitBlocking reaped the child")
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("Wait: %v", err)
	}
}

// A pidfd that cannot be had right now (the gateway is out of file
// descriptors) must not be taken for an exit: the waiter falls back to the
// blocking wait and the child keeps running.
func TestPidfdOpenFailureNotAnExit(t *testing.T) {
	orig := pidfdOpen
	pidfdOpen = func(int) (uintptr, syscall.Errno) { return 0, syscall.EMFILE }
	t.Cleanup(func() { pidfdOpen = orig })
	s, r := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	if err := s.Send(context.Background(), []byte("still here")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("still here")
	for _, e := range r.snapshot() {
		if e.kind == "exited" {
			t.Fatalf("events: %s", summarize(r.snapshot()))
		}
	}
	if st := s.Stats(); !st.Running {
		t.Fatalf("stats %+v", st)
	}
	if err := s.Send(context.Background(), []byte("!exit 5")); err != nil {
		t.Fatal(err)
	}
	ex := r.waitEvent("exited", 1)
	var ee *ExitError
	if !errors.As(ex.err, &ee) || ee.Status != "exit status 5" {
		t.Fatalf("Exited(1, %v)", ex.err)
	}
}

// Start/stop cycles leave no file descriptor behind (pipes, pidfds), for
// children stopped by Close and children that exit at once, possibly before
// their pidfd is opened.
func TestNoFdLeak(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	for i := range 100 {
		cfg := fakeConfig(t, testkit.FakeOptions{})
		cfg.Command, cfg.Args = "sh", []string{"-c", "exec sleep 1000"}
		if i%2 == 1 {
			cfg.Args = []string{"-c", "exit 3"}
		}
		cfg.StopGrace = 10 * time.Millisecond
		cfg.Logger = discardLogger()
		s, err := StartStdio(cfg, newRecorder(t))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			<-s.Done()
		}
		s.Close()
	}
	if after := fds(); after != before {
		t.Fatalf("%d file descriptors open after 100 cycles, %d before", after, before)
	}
}
