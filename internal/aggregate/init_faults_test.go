package aggregate

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A member that crashes during its first start (backing off) ends the
// client's wait for it at once, however long FirstStartWait is (an hour
// here: the reply must come well within the test's wait), the initialize
// succeeds with the other member, and the crashed one joins the session
// when its next start succeeds. Passes on the old code (the mux wakes
// its waiters on the crash); kept as a guard.
func TestFaultFirstStartCrashEndsWait(t *testing.T) {
	slow := gatedFirstStart(t, "slow")
	fast := fakeMember(t, "fast", testkit.FakeOptions{Marker: marker(t, "fast")})
	fast.FirstStart = fast.Backend.(servers.Server).FirstStart // as the gateway sets it
	e := newEndpoint(t, Options{StartWait: time.Nanosecond, FirstStartWait: time.Hour, PollInterval: 5 * time.Millisecond}, slow.Member, fast)

	cl := openSession(t, e)
	out := cl.send(initializeBody)
	slow.waitEntered(t)
	pids := testkit.Procs(slow.mark)
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
	slow.open(t) // its next start passes the gate: it joins the session
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
	slow := gatedFirstStart(t, "slow")
	e := newEndpoint(t, Options{StartWait: time.Nanosecond, FirstStartWait: time.Hour}, slow.Member)
	const sessions = 20
	var conns []*client
	for i := range sessions {
		cl := openSession(t, e)
		conns = append(conns, cl)
		cl.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`)
	}
	// Each session's initialize and its call to slow.
	testkit.WaitFor(t, "every session waiting for slow", func() bool { return e.Pending() == 2*sessions })
	for _, cl := range conns {
		cl.conn.Close()
	}
	testkit.WaitFor(t, "the waits ended with the sessions", func() bool { return e.Pending() == 0 })
}
