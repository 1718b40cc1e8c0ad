package conn

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// TestHandoffSink: a context without a sink has none; WithHandoff's sink is
// the one Handoff returns, and a sink set deeper in the chain wins.
func TestHandoffSink(t *testing.T) {
	if sink := Handoff(context.Background()); sink != nil {
		t.Fatal("a context without a sink has one")
	}
	var got [][]byte
	ctx := WithHandoff(context.Background(), func(state []byte) { got = append(got, state) })
	ctx = context.WithValue(ctx, struct{ k int }{1}, "other values between")
	sink := Handoff(ctx)
	if sink == nil {
		t.Fatal("Handoff lost the sink")
	}
	sink([]byte("a"))
	inner := WithHandoff(ctx, func([]byte) { got = append(got, []byte("inner")) })
	Handoff(inner)([]byte("b"))
	if want := [][]byte{[]byte("a"), []byte("inner")}; !slices.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("the sinks got %q, want %q", got, want)
	}
}

// TestOwnerBound: an owner-bound Backend's Resume fails with ErrNotPortable
// and no Conn, and so does a wrapped one, without its layer's Middleware.
func TestOwnerBound(t *testing.T) {
	var log []string
	var mu sync.Mutex
	be := Wrap(&logBackend{log: &log, mu: &mu}, named("policy", &log, &mu))
	for _, b := range []Backend{&logBackend{log: &log, mu: &mu}, be} {
		if c, err := b.Resume(context.Background(), &recStream{}, []byte("state")); !errors.Is(err, ErrNotPortable) || c != nil {
			t.Errorf("%T.Resume = %v, %v; want ErrNotPortable", b, c, err)
		}
	}
}

// resumable is a logBackend whose sessions are portable: Resume records
// the state it got.
type resumable struct {
	*logBackend
	states []string
}

func (b *resumable) Resume(ctx context.Context, general Stream, state []byte) (Conn, error) {
	b.states = append(b.states, string(state))
	return b.Open(ctx, general)
}

// TestWrapResume: a resumed connection goes through the same layers as an
// opened one, outermost last-applied, and the Backend gets the state and
// the layers' general stream.
func TestWrapResume(t *testing.T) {
	var log []string
	var mu sync.Mutex
	inner := &resumable{logBackend: &logBackend{log: &log, mu: &mu}}
	be := Wrap(Wrap(inner, named("policy", &log, &mu)), named("tracing", &log, &mu))
	general := &recStream{}
	c, err := be.Resume(context.Background(), general, []byte("v1 state"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inner.states, []string{"v1 state"}) {
		t.Errorf("the Backend resumed from %q", inner.states)
	}
	if g, ok := inner.general[0].(taggedStream); !ok || g.tag != "policy" {
		t.Errorf("the Backend's general stream is %#v, want the policy layer's", inner.general[0])
	}
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	if err != nil {
		t.Fatal(err)
	}
	out := &recStream{}
	c.Handle(context.Background(), &msg, out)
	if want := []string{"tracing", "policy", "server"}; !slices.Equal(log, want) {
		t.Errorf("Handle went through %v, want %v", log, want)
	}
	if replies, _, _ := out.got(); len(replies) != 1 {
		t.Errorf("%d answers, want 1", len(replies))
	}
	inner.fail = errors.New("no")
	if c, err := be.Resume(context.Background(), general, nil); err != inner.fail || c != nil {
		t.Errorf("a failed Resume returned %v, %v", c, err)
	}
}
