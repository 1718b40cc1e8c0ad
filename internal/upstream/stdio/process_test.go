package stdio

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestCrashThenRestart(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Restart = true
	s, r := start(t, cfg)
	ctx := context.Background()
	pid1 := s.PID()
	if err := s.Send(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, []byte("!crash")); err != nil {
		t.Fatal(err)
	}
	ex := r.waitEvent("exited", 1)
	var ee *exec.ExitError
	if !errors.Is(ex.err, ErrExited) || !errors.As(ex.err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Exited(1, %v), want exit status 3", ex.err)
	}
	r.waitEvent("started", 2)
	if err := s.Send(ctx, []byte("again")); err != nil {
		t.Fatal(err)
	}
	if e := r.waitLine("again"); e.gen != 2 {
		t.Fatalf("line arrived in gen %d", e.gen)
	}
	if s.PID() == pid1 || s.PID() == 0 {
		t.Fatalf("PID %d after restart (was %d)", s.PID(), pid1)
	}
	// Handler calls of one generation all precede the next's.
	var order []string
	for _, e := range r.snapshot() {
		order = append(order, e.kind+string('0'+byte(e.gen)))
	}
	want := []string{"started1", "line1", "exited1", "waiting0", "started2", "line2"}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	if err := s.SendGen(ctx, 1, []byte("to the dead")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("SendGen to gen 1: %v", err)
	}
	if err := s.SendGen(ctx, 2, []byte("to the living")); err != nil {
		t.Fatalf("SendGen to gen 2: %v", err)
	}
	r.waitLine("to the living")
	if st := s.Stats(); st.Restarts != 1 || st.Generation != 2 || !st.Running {
		t.Fatalf("stats %+v", st)
	}
	s.Close()
	if ex := r.waitEvent("exited", 2); ex.err != nil {
		t.Fatalf("Exited(2) after Close: %v", ex.err)
	}
}

// Close on a child that ignores stdin EOF and SIGTERM ends it with SIGKILL
// after two StopGraces, and its grandchild with it.
func TestCloseEscalatesToSIGKILL(t *testing.T) {
	mk := marker(t)
	cfg := fakeConfig(t, testkit.FakeOptions{
		RawEcho: true, IgnoreStdinEOF: true, IgnoreSIGTERM: true, SpawnGrandchild: true, Marker: mk,
	})
	cfg.StopGrace = 150 * time.Millisecond
	s, r := start(t, cfg)
	// An echo proves the fake is past its setup (signals ignored, grandchild
	// started).
	if err := s.Send(context.Background(), []byte("ready?")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("ready?")
	if procs := testkit.Procs(mk); len(procs) != 2 {
		t.Fatalf("want fake and grandchild, found %v", procs)
	}
	begin := time.Now()
	s.Close()
	took := time.Since(begin)
	if took < 2*cfg.StopGrace || took > 2*cfg.StopGrace+5*time.Second {
		t.Fatalf("Close took %v, want about %v", took, 2*cfg.StopGrace)
	}
	if ex := r.waitEvent("exited", 1); ex.err != nil {
		t.Fatalf("Exited after Close: %v", ex.err)
	}
	if left := testkit.WaitProcsGone(mk, failAfter); len(left) > 0 {
		t.Fatalf("processes left after Close: %v", left)
	}
}

// A well-behaved child exits on stdin EOF; its grandchild, still holding
// stdout, is killed with the group, so Close is quick and leaves nothing.
func TestCloseGracefulKillsGrandchild(t *testing.T) {
	mk := marker(t)
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true, SpawnGrandchild: true, Marker: mk})
	cfg.StopGrace = 10 * time.Second // Close must not need it
	s, r := start(t, cfg)
	if err := s.Send(context.Background(), []byte("ready?")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("ready?")
	if procs := testkit.Procs(mk); len(procs) != 2 {
		t.Fatalf("want fake and grandchild, found %v", procs)
	}
	begin := time.Now()
	s.Close()
	if took := time.Since(begin); took >= cfg.StopGrace {
		t.Fatalf("Close took %v: escalated instead of a clean stop", took)
	}
	if ex := r.waitEvent("exited", 1); ex.err != nil {
		t.Fatalf("Exited after Close: %v", ex.err)
	}
	if left := testkit.WaitProcsGone(mk, failAfter); len(left) > 0 {
		t.Fatalf("processes left after Close: %v", left)
	}
}

// A crash leaves the grandchild holding stdout; it is killed with the group
// at once, so Exited is not held up and the restart happens.
func TestCrashKillsGrandchild(t *testing.T) {
	mk := marker(t)
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true, SpawnGrandchild: true, Marker: mk})
	cfg.StopGrace = 10 * time.Second // the drain bound must not be what ends stdout
	s, r := start(t, cfg)
	if err := s.Send(context.Background(), []byte("!crash")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("exited", 1)
	if left := testkit.WaitProcsGone(mk, failAfter); len(left) > 0 {
		t.Fatalf("processes left after crash: %v", left)
	}
	s.Close()
}

// When the command disappears, restarts fail and keep backing off until it
// is back.
func TestRestartAfterSpawnFailures(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, hidden := filepath.Join(dir, "fake"), filepath.Join(dir, "hidden")
	copyFile(t, exe, bin)
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Command, cfg.Restart = bin, true
	s, r := start(t, cfg)
	if err := os.Rename(bin, hidden); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), []byte("!exit 1")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("exited", 1)
	testkit.WaitFor(t, "two failed restarts", func() bool { return s.Stats().SpawnFailures >= 2 })
	if _, running := s.Generation(); running {
		t.Fatal("running without a command")
	}
	if err := s.Send(context.Background(), []byte("x")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Send while down: %v", err)
	}
	if err := os.Rename(hidden, bin); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("started", 2)
	if err := s.Send(context.Background(), []byte("back")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("back")
}

// Close during the backoff wait returns at once, without another start.
func TestCloseDuringBackoff(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Restart, cfg.MinBackoff, cfg.MaxBackoff = true, time.Hour, time.Hour
	s, r := start(t, cfg)
	if err := s.Send(context.Background(), []byte("!crash")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("exited", 1)
	s.Close()
	if gen, _ := s.Generation(); gen != 1 {
		t.Fatalf("generation %d after Close", gen)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TrySendGen reaches only the generation it names, and never waits.
func TestTrySendGen(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Restart = true
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	if err := s.TrySendGen(0, []byte("gen zero")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("TrySendGen(0): %v, want ErrNotRunning", err)
	}
	if err := s.TrySendGen(2, []byte("to the unborn")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("TrySendGen(2) while gen 1 runs: %v, want ErrNotRunning", err)
	}
	if err := s.TrySendGen(1, []byte("to gen one")); err != nil {
		t.Fatalf("TrySendGen(1): %v", err)
	}
	if e := r.waitLine("to gen one"); e.gen != 1 {
		t.Fatalf("line arrived in gen %d", e.gen)
	}
	if err := s.TrySendGen(1, []byte("!crash")); err != nil {
		t.Fatal(err)
	}
	r.waitEvent("started", 2)
	// The exited generation's answer must not reach its successor.
	if err := s.TrySendGen(1, []byte("to the dead")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("TrySendGen(1) after the restart: %v, want ErrNotRunning", err)
	}
	if err := s.TrySendGen(2, []byte("to gen two")); err != nil {
		t.Fatalf("TrySendGen(2): %v", err)
	}
	r.waitLine("to gen two")
	for _, e := range r.snapshot() {
		if e.kind == "line" && e.data == "to the dead" {
			t.Fatal("a message for gen 1 reached gen 2")
		}
	}
	s.Close()
	if err := s.TrySendGen(2, []byte("closed")); !errors.Is(err, ErrClosed) {
		t.Fatalf("TrySendGen after Close: %v, want ErrClosed", err)
	}
}
