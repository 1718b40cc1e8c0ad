package aggregate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcptest"
)

// A member that crashes during its first start (backing off) ends the
// client's wait for it at once, however long FirstStartWait is (an hour
// here: the reply must come well within the test's wait), the initialize
// succeeds with the other member, and the crashed one joins the session
// when its next start succeeds. Passes on the old code (the mux wakes
// its waiters on the crash); kept as a guard.
func TestFaultFirstStartCrashEndsWait(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "download")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	mark := marker(t, "slow")
	slow := fakeMember(t, "slow", mcptest.FakeOptions{StartGate: gate, Marker: mark})
	slow.FirstStart = slow.Backend.(backend.FirstStarter).FirstStart
	entered := make(chan struct{})
	var once sync.Once
	slow.Backend = &gateBackend{Backend: slow.Backend, hold: func(msg *jsonrpc.Message) <-chan struct{} {
		if msg.MethodIs("initialize") {
			once.Do(func() { close(entered) })
		}
		return nil
	}}
	fast := fakeMember(t, "fast", mcptest.FakeOptions{Marker: marker(t, "fast")})
	fast.FirstStart = fast.Backend.(backend.FirstStarter).FirstStart // as the gateway sets it
	e := newEndpoint(t, Options{StartWait: time.Nanosecond, FirstStartWait: time.Hour, PollInterval: 5 * time.Millisecond}, slow, fast)

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
	pids := mcptest.Procs(mark)
	if len(pids) != 1 {
		t.Fatalf("slow's processes: %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil { // it crashes mid-download
		t.Fatal(err)
	}
	if r := out.reply(t); !strings.Contains(string(r), `"result"`) {
		t.Fatalf("initialize: %s", r)
	}
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	if tools := cl.tools(); slices.Contains(tools, "slow__echo") || !slices.Contains(tools, "fast__echo") {
		t.Fatalf("tools %v, want fast's only while slow backs off", tools)
	}
	// Its next start passes the gate: it joins the session.
	f, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	if tools := cl.tools(); !slices.Contains(tools, "slow__echo") {
		t.Errorf("tools %v after slow started, want its tools too", tools)
	}
}

// Many sessions initializing while a member is on its first start wait
// for it (one call of the endpoint's own each, counted in Pending), and
// all of them end when their clients leave, the member still starting:
// nothing waits out FirstStartWait (an hour here). Passes on the old
// code; kept as a guard.
func TestFaultFirstStartWaitersEndWithSessions(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "download")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	slow := fakeMember(t, "slow", mcptest.FakeOptions{StartGate: gate, Marker: marker(t, "slow")})
	slow.FirstStart = slow.Backend.(backend.FirstStarter).FirstStart
	e := newEndpoint(t, Options{StartWait: time.Nanosecond, FirstStartWait: time.Hour}, slow)
	const sessions = 20
	var conns []*client
	for i := range sessions {
		general := newStream()
		c, err := e.Open(context.Background(), general)
		if err != nil {
			t.Fatal(err)
		}
		cl := &client{t: t, conn: c, general: general}
		conns = append(conns, cl)
		cl.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`)
	}
	// Each session's initialize and its call to slow.
	waitFor(t, "every session waiting for slow", func() bool { return e.Pending() == 2*sessions })
	for _, cl := range conns {
		cl.conn.Close()
	}
	waitFor(t, "the waits ended with the sessions", func() bool { return e.Pending() == 0 })
}
