package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestReloadFaultsMembersStorm: reloads add and remove servers of the
// default endpoint over and over while several sessions of /mcp call
// every server (some calls lasting across reloads): no session ends (every
// POST is 200 on the same session), every call gets exactly one answer
// with its own id (its result, or an error naming its server), and once
// the servers are removed for good no process of theirs is left (the
// package's goleak checks the goroutines).
func TestReloadFaultsMembersStorm(t *testing.T) {
	stamp := time.Now().UnixNano()
	mark := func(name string) string { return fmt.Sprintf("rstorm-%s-%d", name, stamp) }
	server := func(name string) *config.Server { return fakeServer(name, testkit.FakeOptions{Marker: mark(name)}) }
	configWith := func(names ...string) *config.Config {
		var ss []*config.Server
		for _, n := range names {
			ss = append(ss, server(n))
		}
		cfg := newConfig(ss...)
		cfg.Endpoints["all"] = config.NewEndpoint("all", names)
		return cfg
	}
	g, _ := startServing(t, configWith("a", "b"), ReloadOptions{})
	const sessions, reloads = 4, 16
	clients := make([]*mcpClient, sessions)
	for i := range clients {
		clients[i] = g.endpointClient("")
		clients[i].connect(t)
	}
	sets := [][]string{{"a"}, {"a", "b", "c"}, {"a", "c"}, {"a", "b"}}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls, failed := 0, 0
	for s, c := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				member := []string{"a", "b", "c"}[n%3]
				id := fmt.Sprintf(`"s%d-%d"`, s, n)
				body := callBody(id, member+"__echo", map[string]string{"message": id}, "")
				if n%2 == 1 {
					body = callBody(id, member+"__slow", map[string]int{"ms": 50}, "")
				}
				r := c.do(t, c.request(http.MethodPost, body), nil)
				if r.Status != http.StatusOK || len(r.Msgs) != 1 {
					t.Errorf("%s: status %d, %d messages, body %s: want one answer on the same session", id, r.Status, len(r.Msgs), r.Body)
					return
				}
				m := decode(t, r.Msgs[0])
				switch {
				case string(m.ID) != id:
					t.Errorf("%s answered with id %s", id, m.ID)
				case m.Error != nil && !strings.Contains(m.Error.Message, `"`+member) && !strings.Contains(m.Error.Message, `"`+member+`__`):
					t.Errorf("%s to %s: %s, want its result or an error naming it", id, member, m.Error.Message)
				}
				mu.Lock()
				calls++
				if m.Error != nil {
					failed++
				}
				mu.Unlock()
			}
		})
	}
	for n := range reloads {
		if err := g.gw.Reload(configWith(sets[n%len(sets)]...)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d calls (%d answered with an error naming their server) from %d sessions across %d reloads", calls, failed, sessions, reloads)

	// b and c removed for good: their processes are gone; every session
	// still serves a.
	if err := g.gw.Reload(configWith("a")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "c"} {
		if left := testkit.WaitProcsGone(mark(name), 10*time.Second); len(left) != 0 {
			t.Errorf("processes of removed server %s: %+v", name, left)
		}
	}
	for i, c := range clients {
		r := c.post(t, callBody(fmt.Sprint(100+i), "a__echo", map[string]string{"message": "end"}, ""))
		if r.Status != http.StatusOK {
			t.Fatalf("session %d after the storm: %d %s", i, r.Status, r.Body)
		}
		var res struct {
			Content []struct{ Text string } `json:"content"`
		}
		if m := r.final(t); m.Error != nil || json.Unmarshal(m.Result, &res) != nil || len(res.Content) == 0 || res.Content[0].Text != "end" {
			t.Errorf("session %d after the storm: %s", i, r.Msgs)
		}
	}
}
