package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// missingServer is a stdio entry whose command does not exist.
func missingServer(name string) *config.Server {
	gw := config.Defaults()
	s := gw.NewServer(name)
	s.Command = "mcpgate-test-no-such-command-" + name
	return s
}

// TestCriticalServerStopsStartup: a critical server whose command cannot
// be found stops the gateway before anything starts, and the error names
// every such server and its cause.
func TestCriticalServerStopsStartup(t *testing.T) {
	a, b := missingServer("a"), missingServer("b")
	a.Critical, b.Critical = true, true
	marker := fmt.Sprintf("critical-%d", time.Now().UnixNano())
	cfg := newConfig(a, b, missingServer("c"), fakeServer("fine", testkit.FakeOptions{Marker: marker}))
	g, err := Start(cfg, testLogger(t))
	if err == nil {
		g.stopServers()
		t.Fatal("Start succeeded with a critical server that cannot start")
	}
	for _, want := range []string{
		`critical server "a" cannot start: command not found: mcpgate-test-no-such-command-a`,
		`critical server "b" cannot start: command not found: mcpgate-test-no-such-command-b`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `"c"`) {
		t.Errorf("error %q names a server that is not critical", err)
	}
	if n := len(testkit.Procs(marker)); n != 0 {
		t.Errorf("%d processes started before the critical check failed", n)
	}
}

// TestMissingCommandDoesNotStopGateway: a server that cannot start (a
// Claude Desktop "uvx" entry on a machine without uv) is served with an
// error naming the cause; the other servers work.
func TestMissingCommandDoesNotStopGateway(t *testing.T) {
	g := startGateway(t, newConfig(missingServer("uvx"), fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)
	if m := c.post(t, callBody("1", "echo", map[string]string{"message": "hi"}, "")).final(t); m.Error != nil {
		t.Errorf("the working server failed: %s", m.Error.Message)
	}
	r := g.client("uvx").post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if len(r.Msgs) != 1 {
		t.Fatalf("initialize on the missing server: status %d, body %s", r.Status, r.Body)
	}
	if m := decode(t, r.Msgs[0]); m.Error == nil || !strings.Contains(m.Error.Message, "command not found: mcpgate-test-no-such-command-uvx") {
		t.Errorf("initialize on the missing server: %s, want an error naming the missing command", r.Msgs[0])
	}
}

// TestNonLoopbackWarning: listening beyond loopback without auth is
// announced at startup.
func TestNonLoopbackWarning(t *testing.T) {
	for listen, want := range map[string]bool{"0.0.0.0:8080": true, "127.0.0.1:8080": false} {
		cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
		cfg.Gateway.Listen = listen
		var buf testkit.SyncBuffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // serve starts, logs, and shuts down at once
		if err := Serve(ctx, ln, cfg, log); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "non-loopback address without authentication"); got != want {
			t.Errorf("listen %s: warning logged = %v, want %v; log:\n%s", listen, got, want, buf.String())
		}
	}
}

// TestShutdownBoundedWithStubbornSessions: with session isolation and
// several sessions whose processes ignore SIGTERM and stdin EOF, shutdown
// ends within drainTimeout + the handler's bounded close + one stop
// (2*StopGrace), not one stop per session.
func TestShutdownBoundedWithStubbornSessions(t *testing.T) {
	const sessions = 6
	marker := fmt.Sprintf("stubborn-%d", time.Now().UnixNano())
	s := fakeServer("stubborn", testkit.FakeOptions{Marker: marker, IgnoreSIGTERM: true, IgnoreStdinEOF: true})
	s.Isolation = config.IsolationSession
	cfg := newConfig(s)
	cfg.Gateway.DrainTimeout = time.Second
	g := startGateway(t, cfg)
	var wg sync.WaitGroup
	for range sessions {
		wg.Go(func() { g.client("stubborn").connect(t) })
	}
	wg.Wait()
	testkit.WaitFor(t, "every session's process", func() bool { return len(testkit.Procs(marker)) == sessions })
	// Handler.Close waits about 2s for its handlers; allow anything below
	// a second stop (sequential stops: sessions*2*StopGrace).
	bound := cfg.Gateway.DrainTimeout + 2*time.Second + 2*(2*servers.StopGrace)
	start := time.Now()
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= bound {
		t.Errorf("shutdown took %v with %d stubborn sessions, want under %v", d, sessions, bound)
	}
	if left := testkit.WaitProcsGone(marker, 5*time.Second); len(left) > 0 {
		t.Errorf("processes outlived the gateway: %v", left)
	}
}

// TestMaxConnections: connections beyond gateway.maxConnections wait until
// one closes.
func TestMaxConnections(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.MaxConnections = 2
	g := startGateway(t, cfg)
	addr := strings.TrimPrefix(g.URL, "http://")
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	quick := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := quick.Get(g.URL + "/"); err == nil {
		resp.Body.Close()
		t.Fatal("a third connection was served with maxConnections 2")
	}
	idle[0].Close()
	patient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := patient.Get(g.URL + "/")
	if err != nil {
		t.Fatalf("after a connection closed: %v", err)
	}
	resp.Body.Close()
}
