package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// scriptedWriter hands each Write's bytes to the test (calls) and returns
// what the test says (results): the tests decide, write by write, what
// fails and how much of it is written.
type scriptedWriter struct {
	calls   chan []byte
	results chan writeResult
	got     testkit.SyncBuffer // the bytes each Write wrote (its first n)
}

// writeResult is one Write's outcome: n bytes written (-1: all), err.
type writeResult struct {
	n   int
	err error
}

var writeOK = writeResult{n: -1}

func newScriptedWriter() *scriptedWriter {
	return &scriptedWriter{calls: make(chan []byte), results: make(chan writeResult)}
}

func (w *scriptedWriter) Write(p []byte) (int, error) {
	w.calls <- bytes.Clone(p)
	r := <-w.results
	n := r.n
	if n < 0 {
		n = len(p)
	}
	_, _ = w.got.Write(p[:n])
	return n, r.err
}

// step waits for the writer's next Write and answers it with r; it
// returns the bytes it was given.
func (w *scriptedWriter) step(t *testing.T, r writeResult) string {
	t.Helper()
	b := testkit.Receive(t, w.calls, "the audit writer's next write")
	w.results <- r
	return string(b)
}

func auditTestLine(i int) []byte {
	return fmt.Appendf(nil, `{"time":"t","method":"m%d","outcome":"ok"}`+"\n", i)
}

// testAuditLogger is a logger writing text lines to buf.
func testAuditLogger(buf *testkit.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// countLines counts the lines of s holding every one of parts.
func countLines(s string, parts ...string) int {
	n := 0
	for line := range strings.Lines(s) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// A writer that fails four times, then works again: the Auditor keeps
// writing (a bufio.Writer would keep its first error for ever), the lines
// of the failed writes are counted as lost and told by a "dropped" line
// before the next one written; the failures are logged once per
// errorEvery with the number held back, and the recovery once.
func TestAuditRecoversAfterWriteErrors(t *testing.T) {
	w := newScriptedWriter()
	var logs testkit.SyncBuffer
	clock := newTestClock()
	au := NewWith(w, Options{Logger: testAuditLogger(&logs), Name: "audit.jsonl", Now: clock.Now})
	for i := range 4 {
		au.log(auditTestLine(i))
		got := testkit.Receive(t, w.calls, "the audit writer's next write")
		if i == 3 {
			// The writer is past the third failure (it is in the fourth
			// write): the fourth's log line comes after errorEvery.
			clock.advance(errorEvery)
		}
		w.results <- writeResult{err: syscall.ENOSPC}
		// From the second on, the failed write starts with the dropped
		// line (not written either: it stays due).
		if !strings.HasSuffix(string(got), string(auditTestLine(i))) {
			t.Fatalf("failed write %d got %q", i, got)
		}
	}
	au.log(auditTestLine(4))
	first := w.step(t, writeOK)
	au.log(auditTestLine(5))
	second := w.step(t, writeOK)
	au.Close()

	lines := parseAudit(t, w.got.String())
	if len(lines) != 3 || lines[0].Dropped != 4 || lines[1].Method != "m4" || lines[2].Method != "m5" {
		t.Errorf("after the errors the log holds %+v; want a dropped line of 4, then m4 and m5", lines)
	}
	if !strings.HasPrefix(first, `{"time":"2026-01-02T03:04:15Z","dropped":4}`+"\n") || strings.Contains(second, "dropped") {
		t.Errorf("writes after recovery: %q, %q; want the dropped line once, first", first, second)
	}
	if s := au.WriteStats(); s != (WriteStats{Errors: 4, Lost: 4}) {
		t.Errorf("WriteStats %+v, want 4 errors, 4 lost", s)
	}
	if au.Dropped() != 0 {
		t.Errorf("Dropped %d: lost lines were counted as dropped from the queue", au.Dropped())
	}
	out := logs.String()
	if n := countLines(out, "level=ERROR", "audit log write failed", "file=audit.jsonl", `err="no space left on device"`); n != 2 {
		t.Errorf("%d error lines, want 2 (the first failure, then one after errorEvery):\n%s", n, out)
	}
	if countLines(out, "audit log write failed", "failures_held_back=2") != 1 {
		t.Errorf("the second error line does not count the 2 held back:\n%s", out)
	}
	if n := countLines(out, "level=INFO", "audit log writing again", "lost_lines=4"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, out)
	}
}

// A write that stops inside a line (a disk filling up mid-write): the
// lines written whole stay, the partial one is counted as lost, and the
// next write starts on a new line, so every complete line of the file is
// still one JSON object.
func TestAuditPartialWriteKeepsLinesWhole(t *testing.T) {
	w := newScriptedWriter()
	au := NewWith(w, Options{Logger: testAuditLogger(&testkit.SyncBuffer{}), Now: newTestClock().Now})
	au.log(auditTestLine(0))
	testkit.Receive(t, w.calls, "the first write")
	// Queued while the writer is busy: the next batch holds both.
	au.log(auditTestLine(1))
	au.log(auditTestLine(2))
	w.results <- writeOK
	batch := w.step(t, writeResult{n: len(auditTestLine(1)) + 5, err: syscall.ENOSPC})
	if batch != string(auditTestLine(1))+string(auditTestLine(2)) {
		t.Fatalf("second batch %q, want lines 1 and 2", batch)
	}
	au.log(auditTestLine(3))
	if got := w.step(t, writeOK); !strings.HasPrefix(got, "\n{") {
		t.Errorf("the write after a partial line starts %q; want a newline first", got)
	}
	au.Close()

	var methods []string
	var bad, dropped int
	for line := range strings.Lines(w.got.String()) {
		var e auditEntry
		switch err := json.Unmarshal([]byte(line), &e); {
		case err != nil:
			bad++
			if !strings.HasPrefix(string(auditTestLine(2)), strings.TrimSuffix(line, "\n")) {
				t.Errorf("a line that is not JSON and not the partial line: %q", line)
			}
		case e.Dropped > 0:
			dropped += int(e.Dropped)
		default:
			methods = append(methods, e.Method)
		}
	}
	if strings.Join(methods, ",") != "m0,m1,m3" || bad != 1 || dropped != 1 {
		t.Errorf("lines %v, %d partial, %d told dropped; want m0,m1,m3, 1 partial, 1 dropped", methods, bad, dropped)
	}
	if s := au.WriteStats(); s != (WriteStats{Errors: 1, Lost: 1}) {
		t.Errorf("WriteStats %+v, want 1 error, 1 lost", s)
	}
}

// A full device (/dev/full: every write fails with ENOSPC): nothing
// blocks, every line is counted as lost, and the error is logged with the
// file's name.
func TestAuditFullDevice(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer f.Close()
	var logs testkit.SyncBuffer
	au := NewWith(f, Options{Logger: testAuditLogger(&logs), Name: "/dev/full"})
	const n = 50
	for i := range n {
		au.log(auditTestLine(i))
	}
	au.Close()
	if s := au.WriteStats(); s.Lost != n || s.Errors < 1 {
		t.Errorf("WriteStats %+v; want %d lines lost in at least one error", s, n)
	}
	if countLines(logs.String(), "level=ERROR", "audit log write failed", "file=/dev/full", "no space left on device") != 1 {
		t.Errorf("the failure was not logged once:\n%s", logs.String())
	}
}

// blockingWriter blocks every Write until release is closed, telling
// entered the first time.
type blockingWriter struct {
	entered chan struct{}
	once    sync.Once
	release chan struct{}
	buf     testkit.SyncBuffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return w.buf.Write(p)
}

func TestAuditDropsWhenFull(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	au := New(w, false)
	au.log([]byte("{}\n"))
	testkit.Receive(t, w.entered, "the writer to be stalled")
	// The writer stays stalled until release: logging that waited for it
	// would never return.
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		for range Queue + 20 {
			au.log([]byte("{}\n"))
		}
	}()
	testkit.Receive(t, logged, "logging to a stalled writer to return")
	if d := au.Dropped(); d != 20 {
		t.Errorf("dropped %d, want 20", d)
	}
	close(w.release)
	au.Close()
	au.log([]byte("{}\n")) // after Close: dropped, no panic
	if d := au.Dropped(); d != 21 {
		t.Errorf("a line after Close was not counted as dropped: %d", d)
	}
	lines := parseAudit(t, w.buf.String())
	var reported int64
	for _, l := range lines {
		reported += l.Dropped
	}
	if reported != 20 || len(lines) != 1+Queue+1 {
		t.Errorf("%d lines reporting %d dropped; want %d lines and 20", len(lines), reported, 1+Queue+1)
	}
}
