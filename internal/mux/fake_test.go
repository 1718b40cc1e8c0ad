package mux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file holds the in-memory peers of the mux tests: an upstream whose
// queue can be made full (stuck) and whose answers are scripted per method,
// and a recording Stream.

var errFakeQueueFull = errors.New("fake: queue full")

// answerFunc returns the line a fake server writes for a request with the
// given raw id, or nil to leave it unanswered.
type answerFunc func(id string) []byte

func result(body string) answerFunc {
	return func(id string) []byte { return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + body + `}`) }
}

func rpcErr(code int, text string) answerFunc {
	return func(id string) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, text)
	}
}

// fakeUp is a scripted upstream. While stuck, Send blocks until its ctx
// ends and TrySend fails, like a process that stopped reading stdin.
// Requests whose method has an answer are answered at once, from inside
// the write, the way a reader goroutine would deliver the reply.
type fakeUp struct {
	m     *Mux
	gen   atomic.Uint64
	stuck atomic.Bool
	// blocked counts Sends waiting while stuck.
	blocked atomic.Int32

	mu       sync.Mutex
	answers  map[string]answerFunc  // method -> answer; guarded by mu
	sent     [][]byte               // everything written, in order; guarded by mu
	restarts []string               // reasons given to Restart; guarded by mu
	served   []uint64               // generations given to Served; guarded by mu
	events   *[]string              // optional shared event order; guarded by mu
	changed  chan struct{}          // signalled on each write, Restart, Served, blocked Send
	released chan struct{}          // closed by unstick; guarded by mu
	hook     func(*jsonrpc.Message) // optional: runs after each write, before its answer; guarded by mu
}

func newFakeUp(m *Mux) *fakeUp {
	u := &fakeUp{m: m, answers: map[string]answerFunc{
		"initialize": result(`{"protocolVersion":"2025-11-25","capabilities":{"logging":{}}}`),
	}, changed: make(chan struct{}, 1)}
	u.gen.Store(1)
	return u
}

func (u *fakeUp) answer(method string, f answerFunc) {
	u.mu.Lock()
	u.answers[method] = f
	u.mu.Unlock()
}

func (u *fakeUp) signal() {
	select {
	case u.changed <- struct{}{}:
	default:
	}
}

func (u *fakeUp) Send(ctx context.Context, msg []byte) error {
	if u.stuck.Load() {
		u.blocked.Add(1)
		defer func() {
			u.blocked.Add(-1)
			u.signal()
		}()
		u.signal()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-u.releasedCh():
		}
	}
	return u.TrySend(msg)
}

// releasedCh returns the channel closed by unstick.
func (u *fakeUp) releasedCh() chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.released == nil {
		u.released = make(chan struct{})
	}
	return u.released
}

// unstick makes the server read its input again: blocked Sends go through.
func (u *fakeUp) unstick() {
	u.stuck.Store(false)
	close(u.releasedCh())
}

func (u *fakeUp) TrySend(msg []byte) error {
	if u.stuck.Load() {
		return errFakeQueueFull
	}
	req, err := jsonrpc.Parse(msg)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.sent = append(u.sent, bytes.Clone(msg))
	if u.events != nil {
		*u.events = append(*u.events, "upstream "+req.MethodName())
	}
	var line []byte
	if f := u.answers[req.MethodName()]; f != nil && req.Kind == jsonrpc.KindRequest {
		line = f(string(req.Bytes(req.ID)))
	}
	hook := u.hook
	u.mu.Unlock()
	u.signal()
	if hook != nil {
		hook(&req)
	}
	if line != nil {
		u.m.Line(u.gen.Load(), line)
	}
	return nil
}

func (u *fakeUp) Restart(gen uint64, reason string) {
	u.mu.Lock()
	u.restarts = append(u.restarts, reason)
	u.mu.Unlock()
	u.signal()
}

// SendGen and TrySendGen ignore gen: the fake has one process (genUp
// refuses a stale generation).
func (u *fakeUp) SendGen(ctx context.Context, _ uint64, msg []byte) error { return u.Send(ctx, msg) }
func (u *fakeUp) TrySendGen(_ uint64, msg []byte) error                   { return u.TrySend(msg) }

// CanRestart is true: Restart records its reason, and the test plays the
// supervisor (Exited, Started) when it wants the restart to happen.
func (u *fakeUp) CanRestart() bool { return true }
func (u *fakeUp) PID() int         { return 0 }

func (u *fakeUp) Served(gen uint64) {
	u.mu.Lock()
	u.served = append(u.served, gen)
	u.mu.Unlock()
	u.signal()
}

// waitFor waits until cond, checked under u.mu, holds.
func (u *fakeUp) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, what, func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return cond()
	})
}

// written returns the messages written with method, under u.mu.
func (u *fakeUp) writtenLocked(method string) []jsonrpc.Message {
	var out []jsonrpc.Message
	for _, s := range u.sent {
		if msg, err := jsonrpc.Parse(s); err == nil && msg.MethodIs(method) {
			out = append(out, msg)
		}
	}
	return out
}

// rec is a Stream that records what it gets.
type rec struct {
	mu      sync.Mutex
	sends   [][]byte
	replies [][]byte
	events  *[]string // optional shared event order, guarded by its fakeUp's mu
	evMu    *sync.Mutex
	got     chan struct{}
}

func newRec() *rec { return &rec{got: make(chan struct{}, 1)} }

func (r *rec) Send(msg []byte) {
	r.mu.Lock()
	r.sends = append(r.sends, msg)
	r.mu.Unlock()
	r.signal()
}

func (r *rec) Reply(msg []byte) {
	if r.events != nil {
		r.evMu.Lock()
		*r.events = append(*r.events, "reply")
		r.evMu.Unlock()
	}
	r.mu.Lock()
	r.replies = append(r.replies, msg)
	r.mu.Unlock()
	r.signal()
}

func (r *rec) signal() {
	select {
	case r.got <- struct{}{}:
	default:
	}
}

// wait waits (generously) until the stream holds n replies and returns them.
func (r *rec) waitReplies(t *testing.T, n int) [][]byte {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		if len(r.replies) >= n {
			out := append([][]byte(nil), r.replies...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("timed out waiting for %d replies", n)
		}
	}
}

func (r *rec) numSends() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sends)
}

// startShared returns a ready shared Mux over a fake upstream.
func startShared(t *testing.T, opts Options) (*Mux, *fakeUp) {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "t"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := New(opts)
	t.Cleanup(m.Close)
	up := newFakeUp(m)
	m.SetUpstream(up)
	m.Started(1)
	waitPhase(t, m, Ready)
	return m, up
}

// waitPhase waits for the Mux to reach phase p.
func waitPhase(t *testing.T, m *Mux, p Phase) State {
	t.Helper()
	var st State
	testkit.WaitFor(t, fmt.Sprintf("phase %v", p), func() bool {
		st = m.State()
		return st.Phase == p
	})
	return st
}

// request parses a client request.
func request(t *testing.T, id, method, params string) *jsonrpc.Message {
	t.Helper()
	raw := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
	if params != "" {
		raw += `,"params":` + params
	}
	msg, err := jsonrpc.Parse([]byte(raw + "}"))
	if err != nil {
		t.Fatal(err)
	}
	return &msg
}

// errorCode returns the code and message of an error reply, or ok false.
func errorCode(t *testing.T, raw []byte) (code int, text string, ok bool) {
	t.Helper()
	msg, err := jsonrpc.Parse(raw)
	if err != nil {
		t.Fatalf("bad reply %s: %v", raw, err)
	}
	if !msg.IsError {
		return 0, "", false
	}
	e := errorOf(raw)
	return e.Code, e.Message, true
}
