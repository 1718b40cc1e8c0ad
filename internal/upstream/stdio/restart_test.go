package stdio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Restart kills only the generation it names, and Exited tells why.
func TestRestartOnRequest(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true, IgnoreSIGTERM: true})
	cfg.Restart = true
	s, r := start(t, cfg)
	if err := s.Send(context.Background(), []byte("up?")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("up?")
	s.Restart(2, "wrong generation") // no-op
	s.Restart(1, "initialize timed out after 120s")
	ex := r.waitEvent("exited", 1)
	var ee *ExitError
	if !errors.As(ex.err, &ee) || ee.Stuck || ee.Reason != "initialize timed out after 120s" ||
		!strings.Contains(ex.err.Error(), "killed by the gateway: initialize timed out after 120s") {
		t.Fatalf("Exited(1, %v)", ex.err)
	}
	r.waitEvent("started", 2)
	s.Restart(1, "stale") // no-op: gen 1 is gone
	if err := s.Send(context.Background(), []byte("again")); err != nil {
		t.Fatal(err)
	}
	if e := r.waitLine("again"); e.gen != 2 {
		t.Fatalf("line in gen %d", e.gen)
	}
	if st := s.Stats(); st.Killed != 1 || st.Generation != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// The ExitError of a crash carries the status, the uptime and the last
// stderr lines, each cut short.
func TestExitErrorStderrTail(t *testing.T) {
	s, r := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	long := strings.Repeat("é", 150) // 300 bytes; a cut may split a character
	for i := range 7 {
		if err := s.Send(context.Background(), fmt.Appendf(nil, "!stderr line %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Send(context.Background(), []byte("!stderr "+long)); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), []byte("!exit 4")); err != nil {
		t.Fatal(err)
	}
	ex := r.waitEvent("exited", 1)
	var ee *ExitError
	if !errors.As(ex.err, &ee) {
		t.Fatalf("Exited(1, %v)", ex.err)
	}
	want := []string{"line 3", "line 4", "line 5", "line 6", strings.Repeat("é", stderrTailBytes/2)}
	if ee.Status != "exit status 4" || ee.Uptime <= 0 || fmt.Sprint(ee.Stderr) != fmt.Sprint(want) {
		t.Fatalf("ExitError %+v", ee)
	}
	msg := ex.err.Error()
	if !strings.HasPrefix(msg, "upstream: server process exited: exit status 4 after ") ||
		!strings.Contains(msg, `; last stderr: "line 3" | "line 4"`) {
		t.Fatalf("message %q", msg)
	}
}

// The crash-loop backoff keeps growing while processes die without having
// served a request, even if each ran well over 10*MinBackoff (the old reset
// rule), and starts over after one that served or stayed up StableAfter.
func TestBackoffResetsOnlyAfterServedOrStable(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Restart = true
	cfg.MinBackoff, cfg.MaxBackoff = 5*time.Millisecond, time.Minute
	// Long enough that no run meant to be short becomes stable because a
	// busy machine made the child slow to act on its crash (1.3 s seen at
	// a load average of 11 with a 1 s window).
	cfg.StableAfter = 5 * time.Second
	s, r := start(t, cfg)
	waits := func() []time.Duration {
		var ds []time.Duration
		for _, e := range r.snapshot() {
			if e.kind == "waiting" {
				ds = append(ds, e.wait)
			}
		}
		return ds
	}
	crash := func(gen uint64, upFor time.Duration) time.Duration {
		t.Helper()
		r.waitEvent("started", gen)
		// The run length is the scenario under test, not a wait for a result.
		time.Sleep(upFor)
		if err := s.SendGen(context.Background(), gen, []byte("!crash")); err != nil {
			t.Fatal(err)
		}
		n := len(waits())
		r.waitFor("Waiting", func([]event) bool { return len(waits()) > n })
		return waits()[n]
	}
	// failures 0, 1, 2, 3: d in [2.5,5], [5,10], [10,20], [20,40] ms.
	for gen := uint64(1); gen <= 3; gen++ {
		crash(gen, 10*cfg.MinBackoff+20*time.Millisecond)
	}
	if d := crash(4, 0); d < 20*time.Millisecond {
		t.Fatalf("4th consecutive failure waits %v: the backoff was reset", d)
	}
	s.Served(4) // no-op: gen 4 is over
	r.waitEvent("started", 5)
	s.Served(5)
	if d := crash(5, 0); d > cfg.MinBackoff {
		t.Fatalf("after a served run the wait is %v, want at most %v", d, cfg.MinBackoff)
	}
	crash(6, 0)
	if d := crash(7, cfg.StableAfter+50*time.Millisecond); d > cfg.MinBackoff {
		t.Fatalf("after a stable run the wait is %v, want at most %v", d, cfg.MinBackoff)
	}
}

// With Restart, a command that cannot be run does not fail StartStdio: the
// Stdio reports Waiting with the cause and retries until the command exists.
func TestSpawnFailureWithRestartRetries(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "uvx")
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Command, cfg.Restart = bin, true
	s, r := start(t, cfg)
	if err := s.Send(context.Background(), []byte("x")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Send before any start: %v", err)
	}
	evs := r.waitFor("two Waitings", func(evs []event) bool { return len(evs) >= 2 })
	for _, e := range evs[:2] {
		if e.kind != "waiting" || !errors.Is(e.err, ErrSpawn) || e.err.Error() != "command not found: "+bin {
			t.Fatalf("events: %s", summarize(evs))
		}
	}
	if gen, running := s.Generation(); gen != 0 || running {
		t.Fatalf("Generation() = %d, %v", gen, running)
	}
	copyFile(t, exe, bin+".tmp") // then rename: never run a half-copied file
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("started", 1)
	if err := s.Send(context.Background(), []byte("here")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("here")
	if st := s.Stats(); st.SpawnFailures < 2 || st.Restarts != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A process the gateway had to kill (Restart after a hung initialize, or
// the stuck rule) was not a good run however long it was up: a server that
// hangs in initialize until it is restarted keeps backing off.
func TestBackoffKeepsGrowingAfterGatewayKills(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Restart = true
	cfg.MinBackoff, cfg.MaxBackoff = 5*time.Millisecond, time.Minute
	cfg.StableAfter = 50 * time.Millisecond
	s, r := start(t, cfg)
	var d time.Duration
	for gen := uint64(1); gen <= 4; gen++ {
		r.waitEvent("started", gen)
		// Up longer than StableAfter: the run length is the scenario.
		time.Sleep(cfg.StableAfter + 30*time.Millisecond)
		s.Restart(gen, "initialize timed out")
		r.waitEvent("exited", gen)
		evs := r.waitFor("Waiting", func(evs []event) bool { return evs[len(evs)-1].kind == "waiting" })
		d = evs[len(evs)-1].wait
	}
	// failures 0, 1, 2, 3: the 4th wait is in [20ms, 40ms].
	if d < 20*time.Millisecond {
		t.Fatalf("4th restart after a gateway kill waits %v: the backoff was reset", d)
	}
}

// A process that already exited on its own, before its waiter noticed, is
// not reported as killed by the gateway when Restart or the stuck rule
// races with that exit: its ExitError keeps its own status and no reason.
func TestKillAfterNaturalExitIsNoOp(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if err := waitBlocking(cmd.Process.Pid); err != nil { // exited, not reaped
		t.Fatal(err)
	}
	s := &Stdio{log: discardLogger()}
	p := &proc{s: s, pid: cmd.Process.Pid, exited: make(chan struct{})}
	if p.kill("initialize timed out", false) {
		t.Fatal("kill reported killing a process that had exited")
	}
	if p.killReason != "" {
		t.Fatalf("kill reason %q recorded for an exited process", p.killReason)
	}
}
