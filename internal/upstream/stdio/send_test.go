package stdio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// slowEchoScript echoes stdin to stdout line by line with the shell's
// read, which takes a byte per system call: a child that reads slowly, so
// that the pipe fills and senders' messages queue.
const slowEchoScript = `while IFS= read -r l; do printf '%s\n' "$l"; done`

// senderMsg is the i-th message of sender g. Sender 0's first is bigger
// than a pipe holds, so its write is always cut short by a full pipe.
func senderMsg(g, i int) string {
	pad := (i * 997) % 2000
	if g == 0 && i == 0 {
		pad = 100 << 10
	}
	return fmt.Sprintf(`{"g":%d,"i":%d,"pad":"%s"}`, g, i, strings.Repeat("p", pad))
}

// parseSenderMsg returns the sender and index of a line senderMsg made.
func parseSenderMsg(line string) (g, i int, ok bool) {
	if _, err := fmt.Sscanf(line, `{"g":%d,"i":%d`, &g, &i); err != nil {
		return 0, 0, false
	}
	return g, i, line == senderMsg(g, i)
}

// sendAll has each of senders goroutines Send its messages 0..each-1 in
// order, and returns the errors of the Sends that failed.
func sendAll(s *Stdio, senders, each int) []error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.Send(context.Background(), []byte(senderMsg(g, i))); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

// checkOrder fails unless every line is one whole message of senderMsg and
// each sender's messages come in order with none missing: those of sender
// g are 0..n-1 for some n. The last line may be the start of a message
// (a child that died mid-line) when partialLast is set.
func checkOrder(t *testing.T, lines []string, partialLast bool) map[int]int {
	t.Helper()
	next := make(map[int]int)
	for k, line := range lines {
		g, i, ok := parseSenderMsg(line)
		if !ok {
			if partialLast && k == len(lines)-1 {
				break
			}
			t.Fatalf("line %d is not one whole message: %q", k, abbrev(line))
		}
		if i != next[g] {
			t.Fatalf("sender %d: its message %d came where %d was due", g, i, next[g])
		}
		next[g]++
	}
	return next
}

func lineData(evs []event) []string {
	var lines []string
	for _, e := range evs {
		if e.kind == "line" {
			lines = append(lines, e.data)
		}
	}
	return lines
}

// Many goroutines sending at once to a child that reads slowly, so that
// the pipe fills, messages queue and writes are cut short: every message
// arrives whole, once, and each sender's in the order it sent them.
func TestSendersKeepOrderWithSlowReader(t *testing.T) {
	cfg := shConfig(t, slowEchoScript)
	cfg.StuckTimeout = 10 * time.Second // slow is not stuck
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	if err := s.Send(context.Background(), []byte("first")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("first")
	const senders, each = 8, 40
	if errs := sendAll(s, senders, each); len(errs) > 0 {
		t.Fatalf("%d Sends failed, the first: %v", len(errs), errs[0])
	}
	evs := r.waitFor("every message echoed", func(evs []event) bool { return len(lineData(evs)) >= 1+senders*each })
	next := checkOrder(t, lineData(evs)[1:], false)
	for g := range senders {
		if next[g] != each {
			t.Fatalf("sender %d: %d messages echoed, want %d", g, next[g], each)
		}
	}
	st := s.Stats()
	if st.Sent != 1+senders*each || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("%d messages in %d writes", st.Sent, st.Writes)
}

// A child that stops reading stdin while many goroutines send and try to
// send: the pipe and then the queue fill, the stuck rule still fires, and
// every Send returns (blocked ones with
// ErrNotRunning once the child is killed); nothing hangs.
func TestStuckChildWithConcurrentSenders(t *testing.T) {
	cfg := shConfig(t, "exec sleep 1000")
	cfg.StuckTimeout = 300 * time.Millisecond
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	msg := []byte(`{"pad":"` + strings.Repeat("z", 1000) + `"}`)
	const senders, each = 12, 200 // more than the pipe and the queue hold
	done := make(chan error, senders*each)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if g%3 == 0 {
					done <- s.TrySend(msg)
				} else {
					done <- s.Send(context.Background(), msg)
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(failAfter):
		t.Fatal("senders still blocked after the stuck child should have been killed")
	}
	close(done)
	var queued, full, notRunning int
	for err := range done {
		switch {
		case err == nil:
			queued++
		case errors.Is(err, ErrQueueFull):
			full++
		case errors.Is(err, ErrNotRunning):
			notRunning++
		default:
			t.Fatalf("Send: %v", err)
		}
	}
	ex := r.waitEvent("exited", 1)
	var ee *ExitError
	if !errors.As(ex.err, &ee) || !ee.Stuck {
		t.Fatalf("Exited(1, %v), want a stuck ExitError", ex.err)
	}
	st := s.Stats()
	if st.Stuck != 1 || st.Dropped == 0 || notRunning == 0 {
		t.Fatalf("stats %+v; %d accepted, %d queue full, %d not running", st, queued, full, notRunning)
	}
}

// A child that exits after reading part of what it is sent, while many
// goroutines send: every Send returns (accepted, or ErrNotRunning once the
// process is gone), the exit is reported, and what the child echoed before
// it died is whole messages in each sender's order (its last line may be
// cut).
func TestChildDiesMidWrite(t *testing.T) {
	cfg := shConfig(t, "head -c 150000")
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	errs := make(chan []error, 1)
	go func() { errs <- sendAll(s, 8, 40) }()
	select {
	case es := <-errs:
		for _, err := range es {
			if !errors.Is(err, ErrNotRunning) {
				t.Fatalf("Send: %v", err)
			}
		}
	case <-time.After(failAfter):
		t.Fatal("senders still blocked after the child exited")
	}
	r.waitEvent("exited", 1)
	checkOrder(t, lineData(r.snapshot()), true)
	if err := s.Send(context.Background(), []byte("late")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Send after the exit: %v", err)
	}
}

// Close while goroutines send as fast as they can: every one of them gets
// ErrClosed or ErrNotRunning and stops; Close returns and leaves no
// goroutine behind (goleak, TestMain).
func TestCloseDuringSends(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.Logger = discardLogger()
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	const senders = 8
	var wg sync.WaitGroup
	failed := make(chan error, senders)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := []byte(fmt.Sprintf(`{"sender":%d,"pad":"%s"}`, g, strings.Repeat("c", 64*g)))
			for {
				var err error
				if g%2 == 0 {
					err = s.TrySend(msg)
					if errors.Is(err, ErrQueueFull) {
						continue
					}
				} else {
					err = s.Send(context.Background(), msg)
				}
				if err != nil {
					failed <- err
					return
				}
			}
		}()
	}
	r.waitFor("some lines echoed", func(evs []event) bool { return len(evs) > 100 })
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	for _, ch := range []chan struct{}{closed, all} {
		select {
		case <-ch:
		case <-time.After(failAfter):
			t.Fatal("Close or a sender did not return")
		}
	}
	close(failed)
	for err := range failed {
		if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotRunning) {
			t.Fatalf("Send during Close: %v", err)
		}
	}
}

// The same with a child that reads as fast as it can, so that senders
// race the writer for every write: a message that overtook one its sender
// sent before would show.
func TestSendersKeepOrderWithFastReader(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	s, r := start(t, cfg)
	r.waitEvent("started", 1)
	const senders, each = 8, 1000
	if errs := sendAll(s, senders, each); len(errs) > 0 {
		t.Fatalf("%d Sends failed, the first: %v", len(errs), errs[0])
	}
	evs := r.waitFor("every message echoed", func(evs []event) bool { return len(lineData(evs)) >= senders*each })
	next := checkOrder(t, lineData(evs), false)
	for g := range senders {
		if next[g] != each {
			t.Fatalf("sender %d: %d messages echoed, want %d", g, next[g], each)
		}
	}
	st := s.Stats()
	t.Logf("%d messages in %d writes", st.Sent, st.Writes)
}

// lineSignal is a Handler that signals each stdout line, the way the mux
// wakes the caller waiting for a reply.
type lineSignal struct{ lines chan struct{} }

func (h *lineSignal) Started(uint64)                {}
func (h *lineSignal) Line(uint64, []byte)           { h.lines <- struct{}{} }
func (h *lineSignal) Oversized(uint64, []byte, int) {}
func (h *lineSignal) Exited(uint64, error)          {}
func (h *lineSignal) Waiting(error, time.Duration)  {}
func (h *lineSignal) wait()                         { <-h.lines }
func rusage() (cpu time.Duration, voluntary int64) { // this process, all threads
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu, ru.Nvcsw
}

// BenchmarkRoundTrip: one message in flight at a time through a real
// child that echoes lines (the test binary as a fake), the path of a call
// at one session: Send, the child, the reader, the waiting caller woken.
// Besides time it reports this process's CPU and voluntary context
// switches (threads put to sleep) per round trip: what the hand-offs on
// the path cost, far less disturbed by a busy machine than the time.
func BenchmarkRoundTrip(b *testing.B) {
	name, args, env := testkit.Command(testkit.FakeOptions{RawEcho: true})
	h := &lineSignal{lines: make(chan struct{}, 1)}
	s, err := StartStdio(StdioConfig{
		Name: "bench", Command: name, Args: args, Env: append(syscall.Environ(), env...),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, h)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`)
	ctx := context.Background()
	for range 100 { // warm up: the child's runtime, the pools
		if err := s.Send(ctx, msg); err != nil {
			b.Fatal(err)
		}
		h.wait()
	}
	cpu0, vcs0 := rusage()
	b.ResetTimer()
	for range b.N {
		if err := s.Send(ctx, msg); err != nil {
			b.Fatal(err)
		}
		h.wait()
	}
	b.StopTimer()
	cpu1, vcs1 := rusage()
	b.ReportMetric(float64(cpu1-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(vcs1-vcs0)/float64(b.N), "sleeps/op")
}
