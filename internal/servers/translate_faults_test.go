package servers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Fault tests of translate.go: an extra process that cannot start, a
// translation process that crashes while a request is parked on it or is
// down, the bound reached with every process waiting for input, many clients at
// once. In each, every request gets exactly one answer and nothing hangs
// (each wait has a deadline); the cleanups check that no process outlives
// Close and TestMain that no goroutine does.

// replies returns the replies r got so far.
func replies(r *recorder) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.replies...)
}

// settle returns once the server has read and answered a request sent on c
// after everything before it (the fake answers each line as it reads it,
// and the gateway delivers a line's messages before it reads the next).
func settle(t *testing.T, c conn.Conn) {
	t.Helper()
	if r := callTool(t, c, "echo", `{"message":"settled"}`); toolText(r) != "settled" {
		t.Fatalf("echo: %s", r)
	}
}

// TestTranslationExtraCannotStart: when the extra process for a request
// cannot be spawned, the least busy process of its set serves it (a server
// request there is refused, answered once); when a set's first process
// cannot, its requests are answered with the cause.
func TestTranslationExtraCannotStart(t *testing.T) {
	s, tr, _ := translated(t, "nospawn")
	spawn := tr.spawn
	tr.spawn = func(set capSet, extra bool, cred credential) (*proc, error) { // before any request: static from then on
		if extra || set == setRoots {
			return nil, errors.New("no room for another process")
		}
		return spawn(set, extra, cred)
	}
	a, _ := openTranslated(t, s, `{"sampling":{}}`)
	pa := park(t, a, "A")

	b, _ := openTranslated(t, s, `{"sampling":{}}`)
	if r := callTool(t, b, "echo", `{"message":"still served"}`); toolText(r) != "still served" {
		t.Errorf("echo without an extra: %s", r)
	}
	if r := callTool(t, b, "sample", `{"prompt":"B"}`); !strings.Contains(r, "cannot route") || !strings.Contains(r, `"isError":true`) {
		t.Errorf("B's sampling beside A's parked one: %s, want the refusal as the tool's error", r)
	}
	if n := len(translators(tr)); n != 1 {
		t.Errorf("%d translation processes, want 1", n)
	}

	r, _ := openTranslated(t, s, `{"roots":{}}`)
	if reply := callTool(t, r, "echo", `{"message":"x"}`); !strings.Contains(reply, `"error"`) || !strings.Contains(reply, "no room for another process") {
		t.Errorf("a request whose set's process cannot start: %s, want an error naming the cause", reply)
	}
	if _, err := r.ServerInit(context.Background()); err == nil || !strings.Contains(err.Error(), "no room") {
		t.Errorf("ServerInit: %v", err)
	}

	if got := toolText(pa.answer(t, "a")); got != "a" {
		t.Errorf("A's result %q", got)
	}
}

// TestTranslationCrashWhileParked: a translation process that crashes
// while a request waits for its client's input answers that request once,
// with an error; the client's late answer goes nowhere; the process is
// restarted, and new requests are served, their server requests
// attributed.
func TestTranslationCrashWhileParked(t *testing.T) {
	s, tr, _ := translated(t, "crash")
	a, _ := openTranslated(t, s, `{"sampling":{}}`)
	pid, err := strconv.Atoi(toolText(callTool(t, a, "pid", `{}`)))
	if err != nil {
		t.Fatal(err)
	}
	pa := park(t, a, "A")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil { // the test's own child
		t.Fatal(err)
	}
	if r := pa.out.reply(t); !strings.Contains(r, `"error"`) || !strings.Contains(r, "exit") {
		t.Errorf("the parked request after the crash: %s", r)
	}
	msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"late"},"model":"m"}}`, pa.gid))
	a.Handle(context.Background(), &msg, nil) // its server request died with the process

	testkit.WaitFor(t, "the crashed process to be restarted", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.procs[0].p.m.State().Phase == mux.Ready && pidOf(tr.procs[0].p) != pid
	})
	b, _ := openTranslated(t, s, `{"sampling":{}}`)
	pb := park(t, b, "B")
	if got := toolText(pb.answer(t, "b")); got != "b" {
		t.Errorf("B's result %q", got)
	}
	if n := len(translators(tr)); n != 1 {
		t.Errorf("%d translation processes, want 1: the restarted one, free again", n)
	}
	settle(t, b)
	if n := len(replies(pa.out)); n != 1 {
		t.Errorf("the parked request got %d answers, want 1", n)
	}
	if n := s.Pending(); n != 0 {
		t.Errorf("Pending %d", n)
	}
}

// TestTranslationDownGetsNoExtra: while a set's only process is down
// (backing off after a crash), its requests are answered at once with the
// cause, and no extra process, which would fail alike, is started.
func TestTranslationDownGetsNoExtra(t *testing.T) {
	s, tr, _ := translated(t, "down")
	a, _ := openTranslated(t, s, `{}`)
	if r := callTool(t, a, "crash", `{}`); !strings.Contains(r, `"error"`) {
		t.Fatalf("crash: %s", r)
	}
	b, _ := openTranslated(t, s, `{}`)
	r := callTool(t, b, "echo", `{"message":"x"}`)
	switch {
	case strings.Contains(r, `"error"`):
		if !strings.Contains(r, "exit") {
			t.Errorf("during the backoff: %s, want the cause", r)
		}
	case toolText(r) != "x":
		t.Errorf("echo: %s", r)
	} // else restarted already (the backoff is short)
	if n := len(translators(tr)); n != 1 {
		t.Errorf("%d translation processes, want 1", n)
	}
}

// TestTranslationBoundReached: with the bound of extra processes reached
// and every process waiting for input, a new request goes to the least
// busy one: it is served, its server request refused there (answered
// once), and no process beyond the bound starts.
func TestTranslationBoundReached(t *testing.T) {
	s, tr, _ := translated(t, "bound")
	tr.max = 1 // before any request
	a, _ := openTranslated(t, s, `{"sampling":{}}`)
	pa := park(t, a, "A")
	b, _ := openTranslated(t, s, `{"sampling":{}}`)
	pb := park(t, b, "B")
	c, _ := openTranslated(t, s, `{"sampling":{}}`)
	if r := callTool(t, c, "sample", `{"prompt":"C"}`); !strings.Contains(r, "cannot route") {
		t.Errorf("C's sampling with every process waiting: %s", r)
	}
	settle(t, c)
	if n := len(translators(tr)); n != 2 {
		t.Errorf("%d translation processes, want 2: the first and the one extra allowed", n)
	}
	// A set's first process does not wait for room.
	d, _ := openTranslated(t, s, `{}`)
	settle(t, d)
	if n := len(translators(tr)); n != 3 {
		t.Errorf("%d translation processes with a second set, want 3", n)
	}
	if got := toolText(pb.answer(t, "b")); got != "b" {
		t.Errorf("B's result %q", got)
	}
	if got := toolText(pa.answer(t, "a")); got != "a" {
		t.Errorf("A's result %q", got)
	}
}

// TestTranslationManyAtOnce: many clients at once, each asked for
// sampling and each answering, some closing before their first use: every
// request gets exactly one answer (its result, or the refusal of a server
// request that could not be attributed), and the pool stays within its
// bound. (The clients' goroutines report with Errorf only.)
func TestTranslationManyAtOnce(t *testing.T) {
	s, tr, _ := translated(t, "many")
	const clients = 24
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			if err := manyClient(s, i); err != nil {
				t.Errorf("client %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := len(translators(tr)); n > 1+tr.max {
		t.Errorf("%d translation processes, over the first and %d extras", n, tr.max)
	}
	if n := s.Pending(); n != 0 {
		t.Errorf("Pending %d", n)
	}
}

// manyClient is one client of TestTranslationManyAtOnce.
func manyClient(s Server, i int) error {
	c, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{"sampling":{}}`))
	if err != nil {
		return err
	}
	defer c.Close()
	out := newRecorder()
	msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"q%d"},`+modernMeta+`}}`, i, i, "{}"))
	if i%6 == 5 {
		c.Close() // before its first use
		c.Handle(context.Background(), &msg, out)
		if r := replies(out); len(r) != 1 || !strings.Contains(r[0], "session closed") {
			return fmt.Errorf("closed before use: %q", r)
		}
		return nil
	}
	c.Handle(context.Background(), &msg, out)
	deadline := time.After(30 * time.Second)
	answered := false
	for {
		out.mu.Lock()
		sends, final := append([]string(nil), out.sends...), len(out.replies) > 0
		out.mu.Unlock()
		if final {
			break
		}
		for _, raw := range sends {
			if m, err := jsonrpc.Parse([]byte(raw)); !answered && err == nil && m.MethodIs("sampling/createMessage") {
				answered = true
				resp, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"a%d"},"model":"m"}}`, m.Bytes(m.ID), i))
				c.Handle(context.Background(), &resp, nil)
			}
		}
		select {
		case <-out.got:
		case <-deadline:
			return errors.New("no answer within 30s")
		}
	}
	r := replies(out)
	if len(r) != 1 || (toolText(r[0]) != fmt.Sprintf("a%d", i) && !strings.Contains(r[0], "cannot route")) {
		return fmt.Errorf("answers %q", r)
	}
	// The server's answer to the next request comes after anything more
	// for this one.
	next := newRecorder()
	echo, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`))
	c.Handle(context.Background(), &echo, next)
	select {
	case <-next.got:
	case <-time.After(30 * time.Second):
		return errors.New("no echo within 30s")
	}
	if n := len(replies(out)); n != 1 {
		return fmt.Errorf("%d answers after the next request", n)
	}
	return nil
}
