package aggregate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcptest"
)

// A member on its first start (a first `npx -y` download) is waited for by
// a client's initialize beyond StartWait, so that the session's first
// tools/list has its tools: a connector that reads one list at connect
// time would otherwise never see the member. Without the first-start
// wait, StartWait (1 ns here) would hide it at once.
func TestInitializeWaitsForMemberOnFirstStart(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "download")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	slow := fakeMember(t, "slow", mcptest.FakeOptions{StartGate: gate, Marker: marker(t, "slow")})
	fs, ok := slow.Backend.(backend.FirstStarter)
	if !ok {
		t.Fatalf("a shared server's backend %T does not tell its first start", slow.Backend)
	}
	if !fs.FirstStart() {
		t.Fatal("a server held at its start gate is not on its first start")
	}
	slow.FirstStart = fs.FirstStart // as the gateway sets it
	entered := make(chan struct{})
	var once sync.Once
	slow.Backend = &gateBackend{Backend: slow.Backend, hold: func(msg *jsonrpc.Message) <-chan struct{} {
		if msg.MethodIs("initialize") {
			once.Do(func() { close(entered) })
		}
		return nil
	}}
	fast := fakeMember(t, "fast", mcptest.FakeOptions{Marker: marker(t, "fast")})
	fast.FirstStart = fast.Backend.(backend.FirstStarter).FirstStart
	e := newEndpoint(t, Options{StartWait: time.Nanosecond}, slow, fast)

	general := newStream()
	c, err := e.Open(context.Background(), general)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl := &client{t: t, conn: c, general: general}
	out := cl.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	select {
	case <-entered:
	case <-time.After(wait):
		t.Fatal("the initialize never reached the member on its first start")
	}
	// The download ends: opening the pipe waits for the fake to reach it;
	// closing it lets the fake go on.
	f, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
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
