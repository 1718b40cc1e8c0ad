package aggregate

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// sinkSpy is a member whose Open records whether it was given a handoff
// sink: a portable member (a remote) would hand its own session off.
type sinkSpy struct {
	conn.Backend
	sinks atomic.Int32
}

func (b *sinkSpy) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	if conn.Handoff(ctx) != nil {
		b.sinks.Add(1)
	}
	return b.Backend.Open(ctx, general)
}

// TestEndpointSessionsOwnerBound: an endpoint's sessions stay on the
// replica that opened them (Resume: ErrNotPortable), and the front's
// handoff sink never reaches a member's Open, nor is called.
func TestEndpointSessionsOwnerBound(t *testing.T) {
	m := fakeMember(t, "a", testkit.FakeOptions{})
	spy := &sinkSpy{Backend: m.Backend}
	m.Backend = spy
	e := newEndpoint(t, Options{}, m)
	var handed atomic.Int32
	ctx := conn.WithHandoff(context.Background(), func([]byte) { handed.Add(1) })
	c, err := e.Open(ctx, newStream())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := spy.sinks.Load(); n != 0 {
		t.Errorf("%d member Opens got the front's sink", n)
	}
	if n := handed.Load(); n != 0 {
		t.Errorf("the sink was called %d times", n)
	}
	if c, err := e.Resume(ctx, newStream(), []byte{1, 'u', 0, 0, 0, 0}); !errors.Is(err, conn.ErrNotPortable) || c != nil {
		t.Errorf("Resume = %v, %v; want ErrNotPortable", c, err)
	}
}
