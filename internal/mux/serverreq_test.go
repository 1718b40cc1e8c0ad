package mux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// TestServerRequestsBounded: a server flooding sampling requests at the
// one session that can answer them gets the ones over maxServerRequests
// refused with a JSON-RPC error; the table does not grow past the bound.
func TestServerRequestsBounded(t *testing.T) {
	m, up := startShared(t, Options{})
	c, _ := initClient(t, m, `{"sampling":{}}`)
	out := newRec()                                                          // server requests go to the stream of the request in flight
	c.Handle(context.Background(), request(t, "1", "tools/call", `{}`), out) // written, unanswered
	writtenID(t, up, "tools/call", 0)
	for i := range maxServerRequests + 1 {
		m.Line(1, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"s%d","method":"sampling/createMessage","params":{}}`, i))
	}
	if n := out.numSends(); n != maxServerRequests {
		t.Fatalf("%d server requests delivered, want %d", n, maxServerRequests)
	}
	m.mu.Lock()
	n := len(m.serverReqs)
	m.mu.Unlock()
	if n != maxServerRequests {
		t.Fatalf("%d server requests kept, want %d", n, maxServerRequests)
	}
	if st := m.Stats(); st.ServerRequestsOverLimit != 1 {
		t.Fatalf("ServerRequestsOverLimit %d, want 1", st.ServerRequestsOverLimit)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	last := up.sent[len(up.sent)-1]
	msg, err := jsonrpc.Parse(last)
	want := fmt.Sprintf(`"s%d"`, maxServerRequests)
	if err != nil || msg.Kind != jsonrpc.KindResponse || !msg.IsError || string(msg.Bytes(msg.ID)) != want {
		t.Fatalf("last written %s, want an error answer to %s", last, want)
	}
}

// genUp is a fake upstream with TrySendGen: a message for a generation
// that is not the running one is refused, like upstream.Stdio does.
type genUp struct{ *fakeUp }

var errFakeNotRunning = errors.New("fake: generation not running")

func (g genUp) TrySendGen(gen uint64, msg []byte) error {
	if gen != g.gen.Load() {
		return errFakeNotRunning
	}
	return g.TrySend(msg)
}

// TestServerRequestAnswerOnlyToItsGeneration: a client's answer to a
// server request is written only to the process that asked: one that
// exited (restarted before the Mux heard of the exit) must not hand it to
// its successor.
func TestServerRequestAnswerOnlyToItsGeneration(t *testing.T) {
	m := New(Options{Name: "t", Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(m.Close)
	up := genUp{newFakeUp(m)}
	m.SetUpstream(up)
	m.Started(1)
	waitPhase(t, m, Ready)
	c, _ := initClient(t, m, `{"sampling":{}}`)
	out := newRec()
	c.Handle(context.Background(), request(t, "1", "tools/call", `{}`), out)
	writtenID(t, up.fakeUp, "tools/call", 0)
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"a","method":"sampling/createMessage","params":{}}`))
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"b","method":"sampling/createMessage","params":{}}`))
	if out.numSends() != 2 {
		t.Fatalf("%d server requests delivered, want 2", out.numSends())
	}
	gid := func(i int) string {
		out.mu.Lock()
		defer out.mu.Unlock()
		msg, _ := jsonrpc.Parse(out.sends[i])
		return string(msg.Bytes(msg.ID))
	}
	answer := func(i int) {
		msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + gid(i) + `,"result":{"role":"assistant"}}`))
		if err != nil {
			t.Fatal(err)
		}
		c.Handle(context.Background(), &msg, nil)
	}
	answer(0)
	up.gen.Store(2) // the process was restarted; Exited not delivered yet
	dropped := m.Stats().DroppedSends
	answer(1)
	up.mu.Lock()
	var answered []string
	for _, s := range up.sent {
		if msg, err := jsonrpc.Parse(s); err == nil && msg.Kind == jsonrpc.KindResponse {
			answered = append(answered, string(msg.Bytes(msg.ID)))
		}
	}
	up.mu.Unlock()
	if len(answered) != 1 || answered[0] != `"a"` {
		t.Fatalf("answers written %v, want only \"a\": gen 1's answer reached gen 2", answered)
	}
	if m.Stats().DroppedSends != dropped+1 {
		t.Fatal("the answer for the exited generation was not counted as dropped")
	}
}
