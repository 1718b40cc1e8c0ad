package front

import (
	"encoding/json"

	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// keepStreamConn is a Conn that keeps the stream of each request it is
// handed, as a server holding a listen open does.
type keepStreamConn struct {
	conn.OwnerBound
	conn.SessionsOnly
	mu   sync.Mutex
	outs []conn.Stream
}

func (c *keepStreamConn) Handle(_ context.Context, _ *jsonrpc.Message, out conn.Stream) {
	c.mu.Lock()
	c.outs = append(c.outs, out)
	c.mu.Unlock()
}
func (c *keepStreamConn) Version() string     { return "2026-07-28" }
func (c *keepStreamConn) Abandon(conn.Stream) {}
func (c *keepStreamConn) Close()              {}
func (c *keepStreamConn) CloseWith(string)    {}
func (c *keepStreamConn) last() conn.Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outs[len(c.outs)-1]
}
func (b *keepStreamConn) Open(context.Context, conn.Stream) (conn.Conn, error) { return b, nil }

// sendsRecorder is a mux.Stream recording what it is sent.
type sendsRecorder struct {
	mu   sync.Mutex
	sent []string
}

func (r *sendsRecorder) Send(msg []byte) {
	r.mu.Lock()
	r.sent = append(r.sent, string(msg))
	r.mu.Unlock()
}
func (r *sendsRecorder) Reply([]byte) {}
func (r *sendsRecorder) got() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.sent, "\n")
}

// A 2026-07-28 listen held open across a reload that adds a policy (or
// tightens one) must stop carrying the updates of the resources that
// policy hides from the moment it exists, as a session's general stream
// does: the listen was judged once, by the policy in force when it
// arrived (none: its stream was not even wrapped), and went on passing
// notifications/resources/updated of file:///secret.
func TestPolicyFaultsListenAcrossPolicyReload(t *testing.T) {
	for _, before := range []struct {
		name string
		pol  conn.Policy
	}{{"no policy", nil}, {"allow all", allowAllPolicy{}}} {
		t.Run(before.name, func(t *testing.T) {
			var cur atomic.Value
			cur.Store(policyBox{before.pol})
			current := func(string) conn.Policy { return cur.Load().(policyBox).p }
			server := &keepStreamConn{}
			be := guard(server, "s", current)
			c, err := be.Open(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///ok"]}}}`))
			if err != nil {
				t.Fatal(err)
			}
			client := &sendsRecorder{}
			c.Handle(context.Background(), &msg, client)
			cur.Store(policyBox{denySecret{}}) // the reload
			up := server.last()
			up.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///secret"}}`))
			up.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///ok"}}`))
			got := client.got()
			if strings.Contains(got, "file:///secret") {
				t.Errorf("the listen carried an update the policy now hides: %s", got)
			}
			if !strings.Contains(got, "file:///ok") {
				t.Errorf("the listen lost an update the policy allows: %q", got)
			}
		})
	}
}

type policyBox struct{ p conn.Policy }

// allowAllPolicy allows everything.
type allowAllPolicy struct{}

func (allowAllPolicy) Allows(*auth.Principal, string, string, json.RawMessage) bool { return true }
func (allowAllPolicy) AllowsAll(*auth.Principal, string) bool                       { return true }

// replyRecorder is a mux.Stream recording its reply.
type replyRecorder struct {
	mu    sync.Mutex
	reply []byte
}

func (r *replyRecorder) Send([]byte)      {}
func (r *replyRecorder) Reply(msg []byte) { r.mu.Lock(); r.reply = msg; r.mu.Unlock() }
func (r *replyRecorder) got() []byte      { r.mu.Lock(); defer r.mu.Unlock(); return r.reply }

// A reload that removes a target (or an endpoint) under a policy ends its
// sessions with CloseTarget only after the swap, once the endpoints'
// sessions are ended: meanwhile the open sessions of the removed target
// still take requests. Those were judged by the current snapshot, where
// the target and so its policy are gone: no policy, every call let
// through. A target gone from the snapshot keeps the policy last in force
// (one a reload added after the session opened included).
func TestPolicyFaultsRemovedTargetKeepsPolicy(t *testing.T) {
	for _, tc := range []struct{ endpoint, tightened bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		endpoint, tightened := tc.endpoint, tc.tightened
		name := "server"
		if endpoint {
			name = "endpoint"
		}
		if tightened {
			name += " policy added before"
		}
		t.Run(name, func(t *testing.T) {
			server := &keepStreamConn{}
			targets := map[string]conn.Backend{"s": server}
			key := "s"
			cfg := Config{Backends: targets}
			if endpoint {
				key = EndpointKey("s")
				cfg = Config{Endpoints: targets}
			}
			if !tightened {
				cfg.Policies = map[string]conn.Policy{key: denySecret{}}
			}
			h := New(cfg)
			t.Cleanup(h.Close)
			tg := h.loadTargets()
			be := tg.backends["s"]
			if endpoint {
				be = tg.endpoints["s"]
			}
			c, err := be.Open(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tightened {
				// Opened without a policy; a reload adds one, the next
				// removes the target: the policy last in force holds.
				h.SetTargets(Targets{Backends: cfg.Backends, Endpoints: cfg.Endpoints, Policies: map[string]conn.Policy{key: denySecret{}}})
			}
			h.SetTargets(Targets{}) // the reload removing it; CloseTarget comes later
			msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"secret","arguments":{}}}`))
			if err != nil {
				t.Fatal(err)
			}
			out := &replyRecorder{}
			c.Handle(context.Background(), &msg, out)
			server.mu.Lock()
			reached := len(server.outs)
			server.mu.Unlock()
			if reached != 0 {
				t.Fatal("a call the removed target's policy denies reached its server")
			}
			if r := string(out.got()); !strings.Contains(r, "not allowed") {
				t.Errorf("reply %q, want the policy's denial", r)
			}
		})
	}
}
