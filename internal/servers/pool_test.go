package servers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/mcpgate/mcpgate/internal/upstream/stdio"
)

// prewarmed is a session-mode fake server with prewarm and maxProcesses.
func prewarmed(t *testing.T, prewarm, maxProcs int) (*config.Server, string) {
	marker := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	cfg := fakeServer("pooled", testkit.FakeOptions{Marker: marker})
	cfg.Isolation = config.IsolationSession
	cfg.Prewarm, cfg.MaxProcesses = prewarm, maxProcs
	return cfg, marker
}

// pooledPIDs returns the PIDs of s's pooled processes whose Mux is ready
// (started, reader running, waiting for the client's initialize).
func pooledPIDs(s *isolated) []int {
	s.mu.Lock()
	pool := slices.Clone(s.pool)
	s.mu.Unlock()
	var pids []int
	for _, p := range pool {
		if p.m.State().Phase == mux.Ready {
			pids = append(pids, pidOf(p))
		}
	}
	return pids
}

func pidOf(p *proc) int { return p.up.(*stdio.Stdio).PID() }

// initialized sends initialize on c and fails the test unless it succeeds.
func initialized(t *testing.T, c conn.Conn) {
	t.Helper()
	out := newStream()
	handle(t, c, initialize, out)
	if reply := string(out.next(t)); !strings.Contains(reply, `"result"`) {
		t.Fatalf("initialize: %s", reply)
	}
}

// TestPrewarmServesSession: a session gets a process that was started, and
// whose reader ran, before the session arrived; the pool is refilled in the
// background without another Open.
func TestPrewarmServesSession(t *testing.T) {
	cfg, marker := prewarmed(t, 2, 8)
	srv, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s := srv.(*isolatedStdio).isolated
	testkit.WaitFor(t, "two ready pooled processes", func() bool { return len(pooledPIDs(s)) == 2 })
	before := pooledPIDs(s)

	c, err := s.Open(context.Background(), newStream())
	if err != nil {
		t.Fatal(err)
	}
	if pid := pidOf(c.(*isolatedConn).p); !slices.Contains(before, pid) {
		t.Errorf("the session's process %d is not one of the pooled %v: it was started for the session", pid, before)
	}
	initialized(t, c)
	testkit.WaitFor(t, "the pool refilled to two", func() bool { return len(pooledPIDs(s)) == 2 })
	if n := len(testkit.Procs(marker)); n != 3 {
		t.Errorf("%d processes, want 3 (one live, two pooled)", n)
	}
	c.Close()
	srv.Close()
	if left := testkit.WaitProcsGone(marker, 10*time.Second); len(left) > 0 {
		t.Errorf("processes left after Close (pooled ones included): %v", left)
	}
	if _, err := srv.Open(context.Background(), newStream()); !errors.Is(err, errClosed) {
		t.Errorf("Open after Close: %v, want errClosed", err)
	}
}

// TestPrewarmRefillsWhenSlotFrees: a pool drained at maxProcesses fills
// again when a session ends and its process is gone, not only on the next
// Open (which would then pay for a start).
func TestPrewarmRefillsWhenSlotFrees(t *testing.T) {
	cfg, marker := prewarmed(t, 2, 2)
	srv, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s := srv.(*isolatedStdio).isolated
	testkit.WaitFor(t, "two ready pooled processes", func() bool { return len(pooledPIDs(s)) == 2 })
	var conns []conn.Conn
	for range 2 {
		c, err := s.Open(context.Background(), newStream())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	conns[0].Close()
	testkit.WaitFor(t, "a pooled process in the freed slot", func() bool { return len(pooledPIDs(s)) == 1 })
	if n := len(testkit.Procs(marker)); n > 2 {
		t.Errorf("%d processes, over maxProcesses 2", n)
	}
	conns[1].Close()
}

// TestPrewarmPassesOverCrashedProcess: a pooled process that exited, and is
// backing off before its restart, is not handed to a session; the session
// gets a fresh process and its initialize succeeds.
func TestPrewarmPassesOverCrashedProcess(t *testing.T) {
	cfg, marker := prewarmed(t, 1, 4)
	log := testLogger(t)
	opts := mux.Options{Name: cfg.Name, Exclusive: true, Logger: log}
	var started atomic.Bool
	spawn := func() (*proc, error) {
		if started.Swap(true) {
			return startBackoff(cfg, opts, 0, log)
		}
		// The filler's: after a crash it restarts only in an hour.
		return startBackoff(cfg, opts, time.Hour, log)
	}
	s := newIsolated(cfg, cfg.MaxProcesses, spawn, log)
	defer s.Close()
	testkit.WaitFor(t, "a ready pooled process", func() bool { return len(pooledPIDs(s)) == 1 })
	s.mu.Lock()
	crashed := s.pool[0]
	s.mu.Unlock()
	if err := syscall.Kill(pidOf(crashed), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the pooled process to back off", func() bool { return crashed.m.State().Phase == mux.BackingOff })

	c, err := s.Open(context.Background(), newStream())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.(*isolatedConn).p == crashed {
		t.Fatal("the session got the pooled process that is backing off")
	}
	initialized(t, c)
	s.mu.Lock()
	stillPooled := slices.Contains(s.pool, crashed)
	s.mu.Unlock()
	if !stillPooled {
		t.Error("the crashed process left the pool: its supervisor restarts it in place")
	}
	c.Close()
	s.Close()
	if left := testkit.WaitProcsGone(marker, 10*time.Second); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
}

// startBackoff starts cfg's command like start, restarting it after a
// crash no sooner than backoff (0: the default).
func startBackoff(cfg *config.Server, opts mux.Options, backoff time.Duration, log *slog.Logger) (*proc, error) {
	m := mux.New(opts)
	up, err := stdio.StartStdio(stdio.StdioConfig{
		Name: cfg.Name, Command: cfg.Command, Args: cfg.Args, Env: Environ(cfg, os.LookupEnv),
		Restart: true, MinBackoff: backoff, MaxBackoff: backoff, Logger: log,
	}, m)
	if err != nil {
		m.Close()
		return nil, err
	}
	m.SetUpstream(up)
	return &proc{m: m, up: up}, nil
}

// fakeUp is an upstream that is not there: synctest tests below drive the
// pool's bookkeeping, which never writes to a process.
type fakeUp struct{}

func (fakeUp) Close() error { return nil }

// gatedSpawn returns a spawn function whose calls block until gate is
// closed, then return processes behind fakeUp.
func gatedSpawn(gate chan struct{}) func() (*proc, error) {
	return func() (*proc, error) {
		<-gate
		return &proc{m: mux.New(mux.Options{Name: "gated", Exclusive: true}), up: fakeUp{}}, nil
	}
}

// TestOpenAtCapWaitsForFiller: at maxProcesses, with the pool empty while
// the filler is starting a process (it holds the last slot), Open waits for
// that process instead of refusing the session; with its context ended it
// gives up.
func TestOpenAtCapWaitsForFiller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testServer("gated")
		cfg.Isolation, cfg.Prewarm, cfg.MaxProcesses = config.IsolationSession, 1, 1
		gate := make(chan struct{})
		s := newIsolated(cfg, 1, gatedSpawn(gate), testLogger(t))
		synctest.Wait() // the filler is starting the pool's process

		ctx, cancel := context.WithCancel(context.Background())
		gaveUp := make(chan error, 1)
		go func() {
			_, err := s.Open(ctx, newStream())
			gaveUp <- err
		}()
		type opened struct {
			c   conn.Conn
			err error
		}
		got := make(chan opened, 1)
		go func() {
			c, err := s.Open(context.Background(), newStream())
			got <- opened{c, err}
		}()
		synctest.Wait()
		if len(got)+len(gaveUp) > 0 {
			t.Error("Open returned while the filler's process was on its way")
		}
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Errorf("Open with its context cancelled: %v, want context.Canceled", err)
		}
		close(gate)
		if o := <-got; o.err != nil {
			t.Errorf("Open: %v, want the filler's process", o.err)
		} else {
			o.c.Close()
		}
		s.Close()
	})
}

// TestCloseWaitsForStartingOpen: Close returns only after a process that an
// Open was starting is stopped, and that Open fails with errClosed.
func TestCloseWaitsForStartingOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testServer("gated")
		cfg.Isolation = config.IsolationSession
		gate := make(chan struct{})
		s := newIsolated(cfg, 4, gatedSpawn(gate), testLogger(t))
		opened := make(chan error, 1)
		go func() {
			_, err := s.Open(context.Background(), newStream())
			opened <- err
		}()
		synctest.Wait() // Open is starting its process
		closed := make(chan struct{})
		go func() {
			s.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Error("Close returned while an Open was still starting a process")
		default:
		}
		close(gate)
		if err := <-opened; !errors.Is(err, errClosed) {
			t.Errorf("Open during Close: %v, want errClosed", err)
		}
		<-closed
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.count != 0 {
			t.Errorf("%d processes still counted after Close", s.count)
		}
	})
}
