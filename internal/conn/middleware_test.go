package conn

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// logConn is a Conn that appends its name to a shared log on Handle, then
// hands on to next (nil: it is the server's end, and answers).
type logConn struct {
	name string
	next Conn
	log  *[]string
	mu   *sync.Mutex
}

func (c *logConn) Handle(ctx context.Context, msg *jsonrpc.Message, out Stream) {
	c.mu.Lock()
	*c.log = append(*c.log, c.name)
	c.mu.Unlock()
	if c.next != nil {
		c.next.Handle(ctx, msg, out)
		return
	}
	out.Reply(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{}`)))
}
func (c *logConn) Version() string  { return "v" }
func (c *logConn) Abandon(Stream)   {}
func (c *logConn) CloseWith(string) {}
func (c *logConn) Close()           {}
func (c *logConn) ServerInit(context.Context) ([]byte, error) {
	return []byte(`{"init":true}`), nil
}

// logBackend opens logConns, recording the general stream each open got.
type logBackend struct {
	OwnerBound
	log     *[]string
	mu      *sync.Mutex
	general []Stream
	fail    error
}

func (b *logBackend) Open(_ context.Context, general Stream) (Conn, error) {
	b.general = append(b.general, general)
	if b.fail != nil {
		return nil, b.fail
	}
	return &logConn{name: "server", log: b.log, mu: b.mu}, nil
}

func (b *logBackend) ServesStateless() bool { return true }

func (b *logBackend) OpenStateless(ctx context.Context, general Stream, _ string, _ []byte) (StatelessConn, error) {
	c, err := b.Open(ctx, general)
	if err != nil {
		return StatelessConn{}, err
	}
	return NewStatelessConn(c, c.(*logConn).ServerInit, true), nil
}

// named is a Layer whose Middleware logs name, and whose general stream
// is tagged with it.
type taggedStream struct {
	Stream
	tag string
}

func named(name string, log *[]string, mu *sync.Mutex) Layer {
	return func(_ context.Context, general Stream) (Stream, Middleware) {
		return taggedStream{general, name}, func(next Conn) Conn { return &logConn{name: name, next: next, log: log, mu: mu} }
	}
}

// TestWrapOrder: the last Wrap is the outermost, for sessions and
// stateless requests alike; each layer's general stream reaches the
// Backend, the innermost layer's around the one given; a stateless
// connection keeps its server's init and passthrough; a failed open is
// the Backend's error, with no Conn.
func TestWrapOrder(t *testing.T) {
	var log []string
	var mu sync.Mutex
	inner := &logBackend{log: &log, mu: &mu}
	be := Wrap(Wrap(inner, named("policy", &log, &mu)), named("tracing", &log, &mu))
	if !be.ServesStateless() {
		t.Fatal("ServesStateless is not the Backend's")
	}
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	if err != nil {
		t.Fatal(err)
	}
	general := &recStream{}

	c, err := be.Open(context.Background(), general)
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
	// The Backend got the policy's stream around the tracing's around
	// general: the open's layers run outermost first.
	g, ok := inner.general[0].(taggedStream)
	if !ok || g.tag != "policy" {
		t.Fatalf("the Backend's general stream is %#v, want the policy layer's", inner.general[0])
	}
	if g2, ok := g.Stream.(taggedStream); !ok || g2.tag != "tracing" || g2.Stream != general {
		t.Fatalf("under the policy's stream: %#v, want the tracing layer's around general", g.Stream)
	}

	log = nil
	sc, err := be.OpenStateless(context.Background(), general, "2026-07-28", nil)
	if err != nil {
		t.Fatal(err)
	}
	sc.Handle(context.Background(), &msg, &recStream{})
	if want := []string{"tracing", "policy", "server"}; !slices.Equal(log, want) {
		t.Errorf("a stateless Handle went through %v, want %v", log, want)
	}
	if !sc.Passthrough() {
		t.Error("the stateless connection lost its passthrough")
	}
	if init, err := sc.ServerInit(context.Background()); err != nil || string(init) != `{"init":true}` {
		t.Errorf("ServerInit = %s, %v", init, err)
	}

	inner.fail = errors.New("no")
	if c, err := be.Open(context.Background(), general); err != inner.fail || c != nil {
		t.Errorf("a failed Open returned %v, %v", c, err)
	}
	if sc, err := be.OpenStateless(context.Background(), general, "2026-07-28", nil); err != inner.fail || sc.Conn != nil {
		t.Errorf("a failed OpenStateless returned %v, %v", sc.Conn, err)
	}
}

// TestSessionsOnly: a Backend serving sessions only says so, and its
// OpenStateless fails at once with ErrSessionsOnly.
func TestSessionsOnly(t *testing.T) {
	var b SessionsOnly
	if b.ServesStateless() {
		t.Error("SessionsOnly serves stateless requests")
	}
	if sc, err := b.OpenStateless(context.Background(), nil, "2026-07-28", nil); !errors.Is(err, ErrSessionsOnly) || sc.Conn != nil {
		t.Errorf("OpenStateless = %v, %v; want ErrSessionsOnly", sc.Conn, err)
	}
}
