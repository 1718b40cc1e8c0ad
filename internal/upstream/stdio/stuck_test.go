package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// shConfig runs script with sh -c, with the defaults of fakeConfig.
func shConfig(t *testing.T, script string) StdioConfig {
	cfg := fakeConfig(t, testkit.FakeOptions{})
	cfg.Command, cfg.Args = "sh", []string{"-c", script}
	cfg.StopGrace = 50 * time.Millisecond // these children ignore stdin EOF
	return cfg
}

// A child that never reads stdin is killed once a write to it made no
// progress for StuckTimeout: Exited says so, a Send blocked on the full
// queue returns at once, and the supervisor restarts it.
func TestStuckChildKilledAndRestarted(t *testing.T) {
	cfg := shConfig(t, "exec sleep 1000")
	cfg.StuckTimeout = 200 * time.Millisecond
	cfg.Restart = true
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	big := bytes.Repeat([]byte("z"), 256<<10) // more than a pipe holds
	if err := s.Send(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	// Fill the queue; the next Send blocks until the process is killed.
	for range SendQueueLen {
		if err := s.TrySend([]byte("x")); err != nil {
			break
		}
	}
	blocked := make(chan error, 1)
	go func() { blocked <- s.Send(context.Background(), []byte("y")) }()

	ex := r.waitEvent("exited", 1)
	var ee *ExitError
	if !errors.As(ex.err, &ee) || !ee.Stuck || !errors.Is(ex.err, ErrExited) ||
		!strings.Contains(ex.err.Error(), "stuck: stdin not read for 200ms") ||
		!strings.Contains(ex.err.Error(), "signal: killed") {
		t.Fatalf("Exited(1, %v), want a stuck ExitError", ex.err)
	}
	select {
	case err := <-blocked:
		if err != nil && !errors.Is(err, ErrNotRunning) {
			t.Fatalf("blocked Send: %v", err)
		}
	case <-time.After(failAfter):
		t.Fatal("Send still blocked after the stuck process was killed")
	}
	w := r.waitEvent("waiting", 0)
	if !errors.Is(w.err, ErrExited) {
		t.Fatalf("Waiting(%v)", w.err)
	}
	r.waitEvent("started", 2)
	if st := s.Stats(); st.Stuck != 1 || st.Dropped == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A child that reads stdin slowly is not stuck, however long one big
// message takes: the deadline counts from the last progress. The reader
// takes at most 64 KiB per 100 ms, so the 4 MiB take over 6 s, twice
// StuckTimeout (a deadline counted from the start of the write would fire),
// while each step of progress comes far within it, even on a busy machine
// (where a tighter StuckTimeout of 500 ms was missed between two steps).
func TestSlowReaderNotStuck(t *testing.T) {
	cfg := shConfig(t, "while :; do dd bs=65536 count=1 of=/dev/null 2>/dev/null; sleep 0.1; done")
	cfg.StuckTimeout = 3 * time.Second
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	begin := time.Now()
	if err := s.Send(context.Background(), bytes.Repeat([]byte("z"), 4<<20)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the big message written", func() bool { return s.Stats().Sent == 1 })
	took := time.Since(begin)
	t.Logf("4 MiB written in %v with StuckTimeout %v", took, cfg.StuckTimeout)
	if st := s.Stats(); st.Stuck != 0 || !st.Running {
		t.Fatalf("stats %+v", st)
	}
	if took <= cfg.StuckTimeout {
		t.Fatalf("the write took %v, not longer than StuckTimeout %v: the reader was not slow enough to prove anything", took, cfg.StuckTimeout)
	}
}

// floodScript writes n pings to stdout without ever reading stdin.
func floodScript(n int) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "{\"jsonrpc\":\"2.0\",\"id\":$i,\"method\":\"ping\"}"; i=$((i+1)); done; exec sleep 1000`, n)
}

// replier answers every line of the child from the reader goroutine, with
// TrySend or with a blocking Send.
type replier struct {
	*recorder
	s     atomic.Pointer[Stdio]
	ready chan struct{} // closed once s is set
	block bool
	full  atomic.Int64 // TrySends refused
}

func (h *replier) Line(gen uint64, line []byte) {
	h.recorder.Line(gen, nil) // record the count, not the text
	<-h.ready                 // StartStdio may not have returned yet
	s := h.s.Load()
	reply := []byte(`{"jsonrpc":"2.0","id":0,"result":{}}`)
	if h.block {
		_ = s.Send(context.Background(), reply)
	} else if errors.Is(s.TrySend(reply), ErrQueueFull) {
		h.full.Add(1)
	}
}

func startReplier(t *testing.T, cfg StdioConfig, block bool) (*Stdio, *replier) {
	t.Helper()
	h := &replier{recorder: newRecorder(t), ready: make(chan struct{}), block: block}
	s, err := StartStdio(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	h.s.Store(s)
	close(h.ready)
	t.Cleanup(func() { s.Close() })
	return s, h
}

func countLines(evs []event) int {
	n := 0
	for _, e := range evs {
		if e.kind == "line" {
			n++
		}
	}
	return n
}

// 20,000 pings from a child that does not read stdin, answered with
// TrySend: stdout is read to the end although stdin is full, and the excess
// replies are refused, never blocking the reader. (The stuck rule would end
// the child later; StuckTimeout is long here so that the flood, slow under
// -race, is not cut short.)
func TestPingFloodReadWhileStdinFull(t *testing.T) {
	const n = 20_000
	cfg := shConfig(t, floodScript(n))
	cfg.StuckTimeout = time.Minute
	cfg.Logger = discardLogger()
	s, h := startReplier(t, cfg, false)
	h.waitFor("all pings", func(evs []event) bool { return countLines(evs) == n })
	if h.full.Load() == 0 || s.Stats().QueueFull == 0 {
		t.Fatalf("no TrySend was refused; stats %+v", s.Stats())
	}
	if st := s.Stats(); !st.Running || st.Stuck != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The same flood answered with a blocking Send deadlocks both pipes: the
// reader waits for the queue, the writer for the child, the child for its
// stdout. The stuck rule breaks the cycle for good.
func TestPingFloodBlockingReplierNoDeadlock(t *testing.T) {
	cfg := shConfig(t, floodScript(20_000))
	cfg.StuckTimeout = 300 * time.Millisecond
	cfg.Restart = true
	cfg.Logger = discardLogger()
	s, h := startReplier(t, cfg, true)
	ex := h.waitEvent("exited", 1)
	var ee *ExitError
	if !errors.As(ex.err, &ee) || !ee.Stuck {
		t.Fatalf("Exited(1, %v), want stuck", ex.err)
	}
	h.waitEvent("started", 2) // and the next generation runs
	if st := s.Stats(); st.Stuck == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A child that never reads stdin is killed StuckTimeout after the write
// began blocking, before twice as long: not later because the first part of
// a big message fit into the empty pipe (that is no sign of a reader). Every
// Send blocked on the full queue returns with the kill.
func TestStuckKilledWithinTimeout(t *testing.T) {
	cfg := shConfig(t, "exec sleep 1000")
	cfg.StuckTimeout = 2 * time.Second
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	begin := time.Now()
	if err := s.Send(context.Background(), bytes.Repeat([]byte("z"), 256<<10)); err != nil {
		t.Fatal(err)
	}
	for range SendQueueLen {
		if s.TrySend(bytes.Repeat([]byte("y"), 100)) != nil {
			break
		}
	}
	blocked := make(chan error, 50)
	for range cap(blocked) {
		go func() { blocked <- s.Send(context.Background(), []byte("b")) }()
	}
	r.waitEvent("exited", 1)
	// Counted from a later moment (after the part that fit into the pipe),
	// the kill comes a whole StuckTimeout late: the upper bound is that,
	// which a busy machine does not reach.
	took := time.Since(begin)
	if took < cfg.StuckTimeout || took >= 2*cfg.StuckTimeout {
		t.Fatalf("killed %v after the first Send, StuckTimeout %v", took, cfg.StuckTimeout)
	}
	for range cap(blocked) {
		select {
		case err := <-blocked:
			if err != nil && !errors.Is(err, ErrNotRunning) {
				t.Fatalf("blocked Send: %v", err)
			}
		case <-time.After(failAfter):
			t.Fatal("a Send is still blocked after the stuck process was killed")
		}
	}
}

// A child that reads a little at intervals longer than the stuck check's
// tick but shorter than StuckTimeout is slow, not stuck.
func TestBurstyReaderNotStuck(t *testing.T) {
	// Each gap is the sleep and two forks, which a busy machine can make
	// last far longer than the sleep: StuckTimeout leaves room for that.
	cfg := shConfig(t, "while :; do dd bs=16384 count=1 of=/dev/null 2>/dev/null; sleep 0.5; done")
	cfg.StuckTimeout = 3 * time.Second // checked every 375 ms: the sleep is longer
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	if err := s.Send(context.Background(), bytes.Repeat([]byte("z"), 160<<10)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the message written", func() bool { return s.Stats().Sent == 1 })
	if st := s.Stats(); st.Stuck != 0 || !st.Running {
		t.Fatalf("stats %+v", st)
	}
}

// A child that closed its stdin but keeps running can never receive another
// message: it is killed (so pending calls fail at once via Exited, and it is
// restarted), and Send does not pretend to queue for it meanwhile.
func TestChildClosedStdinKilled(t *testing.T) {
	cfg := shConfig(t, "exec 0<&-; exec sleep 1000")
	cfg.Restart = true
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	// The first messages may reach the pipe before sh closes it.
	testkit.WaitFor(t, "Exited(1)", func() bool {
		_ = s.TrySend([]byte("x"))
		for _, e := range r.snapshot() {
			if e.kind == "exited" {
				return true
			}
		}
		return false
	})
	ex := r.waitEvent("exited", 1)
	var ee *ExitError
	if !errors.As(ex.err, &ee) || ee.Stuck || !strings.Contains(ee.Reason, "stdin") {
		t.Fatalf("Exited(1, %v), want a kill for the closed stdin", ex.err)
	}
	r.waitEvent("started", 2)
}

// A child that reads one short line at a time, slowly but steadily, is not
// stuck although the pipe stays full: a pipe gains room only a whole page
// at a time, so progress is what the child took, not what could be written.
func TestSlowLineReaderNotStuck(t *testing.T) {
	cfg := shConfig(t, `while read -r l; do echo "$l"; sleep 0.05; done`)
	// The child reads a line every 50 ms, a fork of sleep apart; on a
	// machine at a load average of 10 a fork took over 400 ms now and then,
	// which a stuck timeout that short took for a child that stopped.
	cfg.StuckTimeout = 1500 * time.Millisecond
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	line := bytes.Repeat([]byte("l"), 49)
	for range 1400 { // 70 KB: more than the pipe holds
		if err := s.Send(context.Background(), line); err != nil {
			t.Fatal(err)
		}
	}
	// 70 lines take 3.5 s (over twice StuckTimeout) and free less than one page.
	r.waitFor("70 lines read", func(evs []event) bool {
		for _, e := range evs {
			if e.kind == "exited" {
				t.Fatalf("Exited(%d, %v) after %d lines", e.gen, e.err, countLines(evs))
			}
		}
		return countLines(evs) >= 70
	})
	if st := s.Stats(); st.Stuck != 0 {
		t.Fatalf("stats %+v", st)
	}
}
