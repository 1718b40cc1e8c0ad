package aggregate

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A member on its first start (a first `npx -y` download) is waited for by
// a client's initialize beyond StartWait, so that the session's first
// tools/list has its tools: a connector that reads one list at connect
// time would otherwise never see the member. Without the first-start
// wait, StartWait (1 ns here) would hide it at once.
func TestInitializeWaitsForMemberOnFirstStart(t *testing.T) {
	slow := gatedFirstStart(t, "slow")
	fs := slow.Backend.(*gateBackend).Backend.(servers.Server)
	if !fs.FirstStart() {
		t.Fatal("a server held at its start gate is not on its first start")
	}
	fast := fakeMember(t, "fast", testkit.FakeOptions{Marker: marker(t, "fast")})
	fast.FirstStart = fast.Backend.(servers.Server).FirstStart
	e := newEndpoint(t, Options{StartWait: time.Nanosecond}, slow.Member, fast)

	cl := openSession(t, e)
	out := cl.send(initializeBody)
	slow.waitEntered(t)
	slow.open(t)
	if r := out.reply(t); !strings.Contains(string(r), `"result"`) {
		t.Fatalf("initialize: %s", r)
	}
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	tools := cl.tools()
	if !slices.Contains(tools, "slow__echo") || !slices.Contains(tools, "fast__echo") {
		t.Fatalf("first tools/list %v, want the tools of both members (slow's first start waited for)", tools)
	}
	if fs.FirstStart() {
		t.Error("a server that has been ready is still on its first start")
	}
}

// initializeBody is a client's initialize.
const initializeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// firstStart is a shared member held at its start gate (a first npx -y
// download, as the gateway reports it through FirstStart).
type firstStart struct {
	Member
	gate    testkit.Gate  // the fake waits on it at startup
	mark    string        // its processes' marker
	entered chan struct{} // closed when a client's initialize reaches it
}

// gatedFirstStart returns member name on its first start, held at its
// start gate until open.
func gatedFirstStart(t *testing.T, name string) *firstStart {
	t.Helper()
	f := &firstStart{gate: testkit.NewGate(t), mark: marker(t, name), entered: make(chan struct{})}
	f.Member = fakeMember(t, name, testkit.FakeOptions{StartGate: f.gate.Path, Marker: f.mark})
	f.FirstStart = f.Backend.(servers.Server).FirstStart // as the gateway sets it
	var once sync.Once
	f.Backend = &gateBackend{Backend: f.Backend, hold: func(msg *jsonrpc.Message) <-chan struct{} {
		if msg.MethodIs("initialize") {
			once.Do(func() { close(f.entered) })
		}
		return nil
	}}
	return f
}

// waitEntered waits for a client's initialize to reach the member.
func (f *firstStart) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-f.entered:
	case <-time.After(wait):
		t.Fatal("the initialize never reached the member on its first start")
	}
}

// open ends the download.
func (f *firstStart) open(t *testing.T) {
	t.Helper()
	f.gate.Open(t)
}

// openSession opens a session of e, not initialized yet.
func openSession(t *testing.T, e *Endpoint) *client {
	t.Helper()
	general := newStream()
	c, err := e.Open(context.Background(), general)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &client{t: t, conn: c, general: general}
}
