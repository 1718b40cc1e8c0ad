package mux

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// This file checks what clients are told and what is logged when a session
// or a server ends: the cause named once, under one "mcpgate:" prefix.

// logRecord is one captured log line.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// capture is a slog.Handler that keeps every record, for tests that assert
// log levels and attributes.
type capture struct {
	mu      sync.Mutex
	records []logRecord // guarded by mu
}

func (h *capture) Enabled(context.Context, slog.Level) bool { return true }
func (h *capture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *capture) WithGroup(string) slog.Handler            { return h }
func (h *capture) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, rec)
	h.mu.Unlock()
	return nil
}

// find returns the records with message msg.
func (h *capture) find(msg string) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range h.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// atLeast returns the records at level or above.
func (h *capture) atLeast(level slog.Level) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range h.records {
		if r.level >= level {
			out = append(out, r)
		}
	}
	return out
}

// inFlight makes a client with one tools/call written upstream and not
// answered.
func inFlight(t *testing.T, m *Mux, up *fakeUp) (*Client, *rec) {
	t.Helper()
	out := newRec()
	c := m.Join(out)
	up.mu.Lock()
	before := len(up.writtenLocked("tools/call"))
	up.mu.Unlock()
	go c.Handle(context.Background(), request(t, "7", "tools/call", `{}`), out)
	up.waitFor(t, "tools/call written", func() bool { return len(up.writtenLocked("tools/call")) == before+1 })
	return c, out
}

func replyText(t *testing.T, out *rec) string {
	t.Helper()
	_, text, isErr := errorCode(t, out.waitReplies(t, 1)[0])
	if !isErr {
		t.Fatal("want an error reply")
	}
	return text
}

// TestCloseWithNamesTheReason: CloseWith tells the session's requests why
// it ended (in flight, waiting for the server, or arriving afterwards);
// Close keeps saying "session closed".
func TestCloseWithNamesTheReason(t *testing.T) {
	m, up := startShared(t, Options{})
	c, out := inFlight(t, m, up)
	c.CloseWith("the session expired")
	if got, want := replyText(t, out), "mcpgate: the session expired"; got != want {
		t.Fatalf("in flight: %q, want %q", got, want)
	}
	late := newRec()
	c.Handle(context.Background(), request(t, "8", "tools/call", `{}`), late)
	if got, want := replyText(t, late), "mcpgate: the session expired"; got != want {
		t.Fatalf("after close: %q, want %q", got, want)
	}

	// A request waiting for the server to be ready.
	m2 := New(Options{Name: "t", Logger: slog.New(slog.DiscardHandler)})
	defer m2.Close()
	m2.SetUpstream(newFakeUp(m2))
	waiting := newRec()
	c2 := m2.Join(waiting)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c2.Handle(context.Background(), request(t, "1", "tools/call", `{}`), waiting)
	}()
	c2.CloseWith("the client deleted the session")
	<-done
	if got, want := replyText(t, waiting), "mcpgate: the client deleted the session"; got != want {
		t.Fatalf("waiting: %q, want %q", got, want)
	}

	c3, out3 := inFlight(t, m, up)
	c3.Close()
	if got, want := replyText(t, out3), "mcpgate: session closed"; got != want {
		t.Fatalf("Close: %q, want %q", got, want)
	}
}

// TestShutdownWording: requests in flight when the Mux closes are told the
// gateway is shutting down.
func TestShutdownWording(t *testing.T) {
	m, up := startShared(t, Options{})
	_, out := inFlight(t, m, up)
	m.Close()
	if got, want := replyText(t, out), "mcpgate: the gateway is shutting down"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// TestExitDuringInitialize: a process that exits while the gateway's
// initialize is pending is not an initialize failure: nothing is logged
// about the initialize, the exit is logged once (with the requests it
// failed), and clients get the exit cause once, under one prefix.
func TestExitDuringInitialize(t *testing.T) {
	logs := &capture{}
	m := New(Options{Name: "slow", Logger: slog.New(logs)})
	defer m.Close()
	up := newFakeUp(m)
	up.answer("initialize", nil) // never answered
	m.SetUpstream(up)
	m.Started(1)
	up.waitFor(t, "initialize written", func() bool { return len(up.writtenLocked("initialize")) == 1 })
	exit := errors.New("upstream: server process exited: exit status 1 after 2ms")
	m.Exited(1, exit)
	waitPhase(t, m, BackingOff)
	out := newRec()
	m.Join(out).Handle(context.Background(), request(t, "1", "tools/call", `{}`), out)
	want := `mcpgate: server "slow" is not available: ` + exit.Error() + "; restarting"
	if got := replyText(t, out); got != want {
		t.Fatalf("reply %q, want %q", got, want)
	}
	m.Close() // waits for the init goroutine of generation 1
	if n := len(logs.find("upstream initialize failed")); n != 0 {
		t.Errorf("initialize failure logged %d times for a process that exited", n)
	}
	exits := logs.find("upstream exited")
	if len(exits) != 1 || exits[0].level != slog.LevelWarn || exits[0].attrs["failed_requests"] != "1" {
		t.Errorf("exit lines %+v, want one WARN with failed_requests=1", exits)
	}
	for _, r := range logs.atLeast(slog.LevelWarn) {
		if r.msg != "upstream exited" {
			t.Errorf("unexpected %v %q %v", r.level, r.msg, r.attrs)
		}
	}
}

// TestInitFailureLoggedAsWarning: an initialize that the server answers
// with an error is logged once, at WARN (the restart follows), not ERROR.
func TestInitFailureLoggedAsWarning(t *testing.T) {
	logs := &capture{}
	m := New(Options{Name: "t", Logger: slog.New(logs)})
	defer m.Close()
	up := newFakeUp(m)
	up.answer("initialize", rpcErr(-32603, "cannot open database"))
	m.SetUpstream(up)
	m.Started(1)
	up.waitFor(t, "a restart", func() bool { return len(up.restarts) == 1 })
	m.Close()
	recs := logs.find("upstream initialize failed")
	if len(recs) != 1 || recs[0].level != slog.LevelWarn {
		t.Fatalf("initialize failure lines %+v, want one WARN", recs)
	}
	if got := recs[0].attrs["err"]; strings.Count(got, "initialize") != 1 {
		t.Errorf("err %q says initialize more than once", got)
	}
	if n := len(logs.atLeast(slog.LevelError)); n != 0 {
		t.Errorf("%d ERROR lines", n)
	}
}

// TestClientTextOnePrefix: an error written to a client after what failed
// carries one "mcpgate:" prefix, and a shutdown is said as such.
func TestClientTextOnePrefix(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errClosed, "mcpgate: the gateway is shutting down"},
		{errors.New("mcpgate: server \"x\" is not available: boom"), `mcpgate: writing to upstream server: server "x" is not available: boom`},
		{errors.New("upstream: server process is not running"), "mcpgate: writing to upstream server: upstream: server process is not running"},
	} {
		if got := clientText("writing to upstream server", tc.err); got != tc.want {
			t.Errorf("clientText(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
