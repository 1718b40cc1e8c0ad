package faults

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// pidOf asks c's server process for its pid (the fake's pid tool).
func (c *client) pidOf(t *testing.T, id int) int {
	t.Helper()
	r, err := c.post(callBody(strconv.Itoa(id), "pid", map[string]string{}, ""))
	if err := answeredOnce(r, err, strconv.Itoa(id)); err != nil {
		t.Fatal(err)
	}
	text, err := toolText(r.final())
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(text)
	if err != nil {
		t.Fatalf("pid tool: %q", text)
	}
	return pid
}

// TestFaultPool_KillOneProcess: a shared server with "processes": 3 and a
// session on each process. kill -9 of one process while the others'
// sessions call on: each of theirs is answered, none held behind the
// crash; the killed process's session is served again once its process
// is restarted. After shutdown no process of the pool, goroutine or file
// descriptor is left.
func TestFaultPool_KillOneProcess(t *testing.T) {
	base := takeBaseline()
	m := marker(t, "pool")
	s := fakeServer("pool", testkit.FakeOptions{Marker: m})
	s.Processes = 3
	g := startGateway(t, newConfig(s))
	var clients []*client
	pids := map[int]*client{}
	for i := range 3 {
		c := g.client("pool")
		c.connect(t)
		pid := c.pidOf(t, i)
		if pids[pid] != nil {
			t.Fatalf("two sessions on process %d", pid)
		}
		pids[pid] = c
		clients = append(clients, c)
	}
	victim := clients[0].pidOf(t, 10)
	healthy := clients[1]
	healthyDuring(t, healthy, func() {
		if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// The third session calls on too, the whole time its neighbour
		// is down.
		for i := range 20 {
			if _, err := clients[2].echo(100+i, fmt.Sprintf("third %d", i)); err != nil {
				t.Errorf("the third process's session: %v", err)
			}
		}
	})
	var lastErr error
	testkit.WaitFor(t, "the killed process's session served again", func() bool {
		_, lastErr = clients[0].echo(200, "back")
		return lastErr == nil
	})
	if pid := clients[0].pidOf(t, 201); pid == victim {
		t.Errorf("the killed process's session still reaches pid %d", pid)
	}
	g.stop()
	base.check(t, m)
}
