package servers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Fault tests of the stateless path of a session-isolated stdio server
// (isolated_stateless.go): a stateless process that cannot start, first
// requests that race each other, and Close racing the first request.

// TestSessionStatelessBadCommand: when the stateless process cannot be
// started (its command does not exist), a stateless request gets one
// answer, an error naming the cause, at once: either OpenStateless fails
// (the HTTP front answers its error) or the connection answers the
// request with an error; nothing waits for a process that never comes.
func TestSessionStatelessBadCommand(t *testing.T) {
	for _, protocol := range []string{config.ProtocolAuto, config.ProtocolLegacy, config.ProtocolModern} {
		t.Run(protocol, func(t *testing.T) {
			cfg := testServer("missing")
			cfg.Command = "mcpgate-test-no-such-command"
			cfg.Isolation = config.IsolationSession
			cfg.Protocol = protocol
			s, err := New(cfg, "test", testLogger(t))
			if err != nil {
				t.Fatalf("New: %v (a server that cannot start must not stop the gateway)", err)
			}
			defer s.Close()
			for i := range 2 { // the first request starts the process, the second finds it down
				start := time.Now()
				answers := statelessAnswers(t, s)
				t.Logf("request %d: %q", i, answers)
				if len(answers) != 1 || !strings.Contains(answers[0], "command not found: mcpgate-test-no-such-command") {
					t.Errorf("request %d: answers %q, want one error naming the missing command", i, answers)
				}
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("request %d: the error took %v: it must come at once, not after a timeout", i, d)
				}
			}
		})
	}
}

// statelessAnswers sends one stateless tools/call to s and returns every
// answer it got: OpenStateless's error, or what the connection replied
// (read after s.Close, so that nothing can come later).
func statelessAnswers(t *testing.T, s Server) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.OpenStateless(ctx, newRecorder(), protocol.StatelessVersion, []byte(`{}`))
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("OpenStateless waited out its context: %v", err)
		}
		return []string{err.Error()}
	}
	defer c.Close()
	out := newRecorder()
	msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},`+modernMeta+`}}`, "{}"))
	c.Handle(ctx, &msg, out)
	out.reply(t)
	c.Close()
	out.mu.Lock()
	defer out.mu.Unlock()
	return append([]string(nil), out.replies...)
}

// TestSessionStatelessStartFails: a stateless server that cannot be
// created at all (an empty command: newShared fails) fails each stateless
// request at once with the cause, is tried again by the next request
// rather than remembered as started, and leaves nothing for Close to wait
// on.
func TestSessionStatelessStartFails(t *testing.T) {
	cfg := testServer("empty")
	cfg.Command = ""
	cfg.Isolation = config.IsolationSession
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`))
		if err == nil || !strings.Contains(err.Error(), "Command is empty") {
			t.Errorf("request %d: OpenStateless: %v, want the start's error", i, err)
		}
	}
	// Concurrent ones: each gets the error of the start it made or
	// waited for.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`))
			if err == nil || !strings.Contains(err.Error(), "Command is empty") {
				t.Errorf("concurrent request: OpenStateless: %v, want the start's error", err)
			}
		})
	}
	wg.Wait()
	is := s.(*isolatedStdio)
	is.mu.Lock()
	st, starting := is.st, is.starting
	is.mu.Unlock()
	if st != nil || starting != nil {
		t.Errorf("after failed starts: server %v, start %v; want neither", st, starting)
	}
	s.Close()

	// With "2026-07-28" the stateless server starts with the Server, whose
	// creation then fails as a shared server's does.
	cfg.Protocol = config.ProtocolModern
	if s, err := New(cfg, "test", testLogger(t)); err == nil {
		s.Close()
		t.Error(`New succeeded with "protocol": "2026-07-28" and a stateless server that cannot be created`)
	}
}

// TestSessionStatelessConcurrentFirstRequests: many first stateless
// requests at once start one stateless server, not one each: they are all
// served by the same process, and no other process runs.
func TestSessionStatelessConcurrentFirstRequests(t *testing.T) {
	for _, modern := range []bool{true, false} {
		t.Run(fmt.Sprintf("modern=%v", modern), func(t *testing.T) {
			s, marker := newSessionServer(t, testkit.FakeOptions{Modern: modern}, config.ProtocolAuto, nil)
			const clients = 16
			pids := make(chan string, clients)
			go1 := make(chan struct{})
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					<-go1
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					c, err := s.OpenStateless(ctx, newRecorder(), protocol.StatelessVersion, []byte(`{}`))
					if err != nil {
						t.Errorf("OpenStateless: %v", err)
						pids <- ""
						return
					}
					defer c.Close()
					if passthrough(c) != modern {
						t.Errorf("passthrough %v, want %v", passthrough(c), modern)
					}
					pids <- toolText(callTool(t, c, "pid", `{}`))
				})
			}
			close(go1)
			wg.Wait()
			close(pids)
			seen := map[string]bool{}
			for pid := range pids {
				seen[pid] = true
			}
			// One stateless server serves them all (one process, as the
			// requests declared the same capabilities). A second one would
			// serve some of them on processes of its own, and, replaced by
			// the first, outlive Close (newSessionServer's cleanup checks).
			if len(seen) != 1 {
				t.Errorf("served by processes %v, want one", seen)
			}
			if procCount(marker) == 0 {
				t.Error("no process found")
			}
		})
	}
}

// TestSessionStatelessCloseRacesFirstRequest: Close racing the first
// stateless request (before, during or after the stateless server's start)
// returns, the request gets an answer (a connection or errClosed), and no
// process outlives Close, the one being started included.
func TestSessionStatelessCloseRacesFirstRequest(t *testing.T) {
	for i := range 20 {
		opts := testkit.FakeOptions{Modern: i%2 == 0, Marker: fmt.Sprintf("iso-race-%d-%d", i, time.Now().UnixNano())}
		cfg := fakeServer("race", opts)
		cfg.Isolation = config.IsolationSession
		s, err := New(cfg, "test", testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if i%4 == 1 {
			openSession(t, s) // a session's process is stopped too
		}
		opened := make(chan error, 1)
		closed := make(chan struct{})
		go1 := make(chan struct{})
		go func() {
			<-go1
			c, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`))
			if c.Conn != nil {
				// Whatever it is connected to is closing: the request is
				// still answered (an error, or a result that won).
				out := newRecorder()
				msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"},`+modernMeta+`}}`, "{}"))
				c.Handle(context.Background(), &msg, out)
				out.reply(t)
				c.Close()
			}
			opened <- err
		}()
		go func() {
			<-go1
			s.Close()
			close(closed)
		}()
		close(go1)
		for range 2 {
			select {
			case err := <-opened:
				// errClosed, or the stateless server's own (its multiplexer's
				// "the gateway is shutting down") when Close came after the
				// start and during the probe.
				if err != nil && !strings.Contains(err.Error(), "shutting down") {
					t.Errorf("run %d: OpenStateless: %v, want a connection or a shutting-down error", i, err)
				}
				opened = nil
			case <-closed:
				closed = nil
			case <-time.After(30 * time.Second):
				t.Fatalf("run %d: OpenStateless or Close did not return", i)
			}
		}
		if left := testkit.WaitProcsGone(opts.Marker, 5*time.Second); len(left) > 0 {
			t.Errorf("run %d: processes left after Close: %v", i, left)
		}
		if _, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`)); !errors.Is(err, errClosed) {
			t.Errorf("run %d: OpenStateless after Close: %v, want errClosed", i, err)
		}
	}
}

// TestSessionStatelessWaitersLeave: a request waiting for the start of the
// stateless server gives up when its client does, and the start goes on
// for the next request. The start in progress is one the test holds: it
// installs it as a first request does and completes it itself.
func TestSessionStatelessWaitersLeave(t *testing.T) {
	s, _ := newSessionServer(t, testkit.FakeOptions{Modern: true}, config.ProtocolAuto, nil)
	is := s.(*isolatedStdio)
	// A start in progress, as a first request makes it.
	is.mu.Lock()
	call := &startCall{done: make(chan struct{})}
	is.starting = call
	is.starts.Add(1)
	is.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := is.OpenStateless(ctx, newRecorder(), protocol.StatelessVersion, []byte(`{}`))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a waiter whose client left: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a waiter whose client left still waits for the start")
	}
	is.start(call) // the start completes
	if got := toolText(callTool(t, openStateless(t, s, `{}`), "echo", `{"message":"hi"}`)); got != "hi" {
		t.Errorf("after the start: %q", got)
	}
}
