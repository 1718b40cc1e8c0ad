package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestEchoRoundTrip(t *testing.T) {
	s, r := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	ctx := context.Background()
	if gen, running := s.Generation(); gen != 1 || !running {
		t.Fatalf("Generation() = %d, %v", gen, running)
	}
	if pid := s.PID(); pid == 0 {
		t.Fatal("PID() = 0 while running")
	} else if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("child is not its own group leader: pgid %d, %v", pgid, err)
	}
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if err := s.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	copy(msg, "XXXXXXXX") // Send copied it
	if err := s.Send(ctx, []byte("second")); err != nil {
		t.Fatal(err)
	}
	r.waitLine("second")
	evs := r.snapshot()
	if evs[0].kind != "started" || evs[0].gen != 1 || evs[1].data != `{"jsonrpc":"2.0","id":1,"method":"ping"}` {
		t.Fatalf("events: %s", summarize(evs))
	}
}

// A pretty-printed message is compacted to one line instead of being
// refused; a raw newline inside a string (invalid JSON) is still refused,
// since no rewriting could keep it one line.
func TestSendCompactsNewlines(t *testing.T) {
	s, r := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	pretty := "{\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": \"a b\",\n\t\"params\": {\"text\": \"x\\ny\"}\n}\n"
	if err := s.Send(context.Background(), []byte(pretty)); err != nil {
		t.Fatalf("Send of a pretty-printed message: %v", err)
	}
	if err := s.TrySend([]byte("[1,\n2]")); err != nil {
		t.Fatalf("TrySend of a pretty-printed message: %v", err)
	}
	r.waitLine(`{"jsonrpc":"2.0","id":"a b","params":{"text":"x\ny"}}`)
	r.waitLine("[1,2]")
	if err := s.Send(context.Background(), []byte("\"two\nlines\"")); !errors.Is(err, ErrNewline) {
		t.Fatalf("Send with a newline inside a string: %v", err)
	}
}

func TestConcurrentSends(t *testing.T) {
	s, r := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	const senders, each = 50, 200
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 64)
			for i := range each {
				buf = fmt.Appendf(buf[:0], `{"sender":%d,"seq":%d,"pad":"%s"}`, g, i, strings.Repeat("p", i%97))
				if err := s.Send(context.Background(), buf); err != nil {
					t.Errorf("Send: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs := r.waitFor("all lines", func(evs []event) bool { return len(evs) >= 1+senders*each })
	seen := make(map[string]bool)
	for _, e := range evs[1:] {
		if e.kind != "line" {
			t.Fatalf("unexpected %s", e.kind)
		}
		if seen[e.data] {
			t.Fatalf("line twice: %s", e.data)
		}
		seen[e.data] = true
	}
	for g := range senders {
		for i := range each {
			want := fmt.Sprintf(`{"sender":%d,"seq":%d,"pad":"%s"}`, g, i, strings.Repeat("p", i%97))
			if !seen[want] {
				t.Fatalf("missing or corrupted: %s", want)
			}
		}
	}
	st := s.Stats()
	if st.Sent != senders*each || st.Lines != senders*each || st.Writes == 0 || st.Writes > st.Sent {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("%d messages in %d writes", st.Sent, st.Writes)
}

func TestFiveMiBLine(t *testing.T) {
	s, r := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	big := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)
	big[0], big[len(big)-1] = '<', '>'
	if err := s.Send(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), []byte("after")); err != nil {
		t.Fatal(err)
	}
	evs := r.waitFor("two lines", func(evs []event) bool { return len(evs) >= 3 })
	if evs[1].data != string(big) || evs[2].data != "after" {
		t.Fatalf("big line came back as %d bytes, then %q", evs[1].size, abbrev(evs[2].data))
	}
}

func TestOversizedLine(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true})
	cfg.MaxLineBytes = 1000
	s, r := start(t, cfg)
	ctx := context.Background()
	for _, m := range []string{"small", "!big 5000", "!big 300000", "after", "!big 1000"} {
		if err := s.Send(ctx, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	evs := r.waitFor("five results", func(evs []event) bool { return len(evs) >= 6 })
	want := []event{
		{kind: "line", data: "small", size: 5},
		{kind: "oversized", data: strings.Repeat("x", OversizedPrefixLen), size: 5000},
		{kind: "oversized", data: strings.Repeat("x", OversizedPrefixLen), size: 300000},
		{kind: "line", data: "after", size: 5},
		{kind: "line", data: strings.Repeat("x", 1000), size: 1000}, // exactly the limit passes
	}
	for i, w := range want {
		got := evs[i+1]
		if got.kind != w.kind || got.data != w.data || got.size != w.size {
			t.Fatalf("event %d: got %s size %d %q, want %s size %d", i, got.kind, got.size, abbrev(got.data), w.kind, w.size)
		}
	}
	if st := s.Stats(); st.OversizedLines != 2 {
		t.Fatalf("OversizedLines = %d", st.OversizedLines)
	}
}

func TestPartialLineAtEOF(t *testing.T) {
	s, r := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	if err := s.Send(context.Background(), []byte("!partial no newline here")); err != nil {
		t.Fatal(err)
	}
	ex := r.waitEvent("exited", 1)
	evs := r.snapshot()
	if len(evs) != 3 || evs[1].data != "no newline here" {
		t.Fatalf("events: %s", summarize(evs))
	}
	if !errors.Is(ex.err, ErrExited) {
		t.Fatalf("unexpected exit reported as %v", ex.err)
	}
	<-s.Done() // no Restart: supervision ends
	if err := s.Send(context.Background(), []byte("x")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Send after exit: %v", err)
	}
	if gen, running := s.Generation(); gen != 1 || running {
		t.Fatalf("Generation() = %d, %v", gen, running)
	}
}

func TestSendAfterClose(t *testing.T) {
	s, _ := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	var wg sync.WaitGroup
	for range 4 { // Close is idempotent and safe to call concurrently
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Close()
		}()
	}
	wg.Wait()
	if err := s.Send(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	if s.PID() != 0 {
		t.Fatal("PID after Close")
	}
}

func TestStartFailures(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ cmd, dir, want string }{
		{"mcpgate-no-such-command-xyz", "", "command not found: mcpgate-no-such-command-xyz"},
		{filepath.Join(dir, "missing"), "", "command not found: " + filepath.Join(dir, "missing")},
		{notExec, "", "cannot run " + notExec + ": permission denied"},
		{dir, "", "cannot run " + dir + ": permission denied"},
		{"sh", filepath.Join(dir, "nodir"), "cannot use working directory " + filepath.Join(dir, "nodir") + " for sh: no such file or directory"},
	} {
		s, err := StartStdio(StdioConfig{Name: "srv", Command: tc.cmd, Dir: tc.dir, Logger: testLogger(t)}, newRecorder(t))
		if err == nil {
			s.Close()
			t.Errorf("StartStdio(%q) succeeded", tc.cmd)
			continue
		}
		if !errors.Is(err, ErrSpawn) || err.Error() != "upstream srv: "+tc.want {
			t.Errorf("StartStdio(%q): %v, want ErrSpawn with %q", tc.cmd, err, tc.want)
		}
	}
	if _, err := StartStdio(StdioConfig{Logger: testLogger(t)}, newRecorder(t)); err == nil {
		t.Error("StartStdio with no Command succeeded")
	}
}

// A child that never reads stdin: Send fills the queue, then waits only as
// long as its ctx, and a Send blocked at Close returns ErrClosed.
func TestSendToStuckChild(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{})
	cfg.Command, cfg.Args = "sleep", []string{"1000"}
	cfg.StopGrace = 50 * time.Millisecond
	s, _ := start(t, cfg)
	msg := bytes.Repeat([]byte("z"), 1024)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := s.Send(ctx, msg)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil || i > SendQueueLen+10_000 {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	blocked := make(chan error)
	go func() { blocked <- s.Send(context.Background(), msg) }()
	s.Close()
	if err := <-blocked; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked Send at Close: %v", err)
	}
	if st := s.Stats(); st.QueueFull == 0 || st.Dropped == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// recordHandler is a slog.Handler that hands each record to a channel.
type recordHandler struct {
	ch    chan slog.Record
	attrs []slog.Attr
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) WithGroup(string) slog.Handler            { return h }
func (h recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	select {
	case h.ch <- r:
	default: // the test reads what it needs; never block the Stdio
	}
	return nil
}

func TestStderrLogged(t *testing.T) {
	logs := make(chan slog.Record, 100)
	cfg := fakeConfig(t, testkit.FakeOptions{RawEcho: true, Stderr: "hello from stderr"})
	cfg.Logger = slog.New(recordHandler{ch: logs})
	s, _ := start(t, cfg)
	pid := s.PID()
	deadline := time.After(failAfter)
	for {
		select {
		case r := <-logs:
			if r.Message != "hello from stderr" {
				continue
			}
			got := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
			if r.Level != slog.LevelInfo || got["server"] != t.Name() || got["stream"] != "stderr" || got["pid"] != fmt.Sprint(pid) {
				t.Fatalf("stderr logged as %v %v", r.Level, got)
			}
			return
		case <-deadline:
			t.Fatal("stderr line not logged")
		}
	}
}

// A lone '\r' is a line break for servers that read stdin with universal
// newlines (Python's text mode), so it is compacted away like '\n' outside
// strings, and refused inside one (raw control characters are invalid JSON).
func TestSendCompactsCarriageReturns(t *testing.T) {
	s, r := start(t, fakeConfig(t, testkit.FakeOptions{RawEcho: true}))
	if err := s.Send(context.Background(), []byte("{\"a\":1,\r\"b\":\"c\\rd\"}")); err != nil {
		t.Fatal(err)
	}
	if err := s.TrySend([]byte("[1,\r2]")); err != nil {
		t.Fatal(err)
	}
	r.waitLine(`{"a":1,"b":"c\rd"}`)
	r.waitLine("[1,2]")
	for _, msg := range []string{"\"one\rline\"", "[\"one\rline\"]\n"} {
		if err := s.Send(context.Background(), []byte(msg)); !errors.Is(err, ErrNewline) {
			t.Fatalf("Send(%q): %v, want ErrNewline", msg, err)
		}
		if err := s.TrySend([]byte(msg)); !errors.Is(err, ErrNewline) {
			t.Fatalf("TrySend(%q): %v, want ErrNewline", msg, err)
		}
	}
}
