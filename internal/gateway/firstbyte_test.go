package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFirstRequestAfterHeaderTimeout: a connection that stays unused
// longer than headerTimeout before its first request, as one dialed into a
// client's pool and not needed at once does, still gets that request
// answered, as a keep-alive connection idle as long would. net/http counts
// ReadHeaderTimeout from accept for a connection's first request: the
// gateway closed it silently at headerTimeout, and a POST sent as it
// closed got EOF (2 calls in 110,000 of a 256-session bench run longer
// than headerTimeout). headerTimeout still bounds the headers from their
// first byte, and idleTimeout a connection that sends nothing.
func TestFirstRequestAfterHeaderTimeout(t *testing.T) {
	cfg := newConfig()
	cfg.Gateway.HeaderTimeout = 200 * time.Millisecond
	cfg.Gateway.IdleTimeout = 2 * time.Second
	g := startGateway(t, cfg)
	addr := strings.TrimPrefix(g.URL, "http://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Unused for three header timeouts, then a POST: answered.
	late := dial()
	time.Sleep(3 * cfg.Gateway.HeaderTimeout)
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	req := fmt.Sprintf("POST /servers/none/mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	if _, err := io.WriteString(late, req); err != nil {
		t.Fatalf("writing the first request: %v", err)
	}
	late.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(late), nil)
	if err != nil {
		t.Fatalf("first request after %v unused: no answer: %v", 3*cfg.Gateway.HeaderTimeout, err)
	}
	resp.Body.Close()
	t.Logf("answered %s", resp.Status)

	// Headers begun and never finished: cut at headerTimeout from their
	// first byte, well before idleTimeout.
	slow := dial()
	if _, err := io.WriteString(slow, "POST /servers/none/mcp HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	if d, err := closedAfter(slow, 10*time.Second); err != nil || d >= cfg.Gateway.IdleTimeout {
		t.Errorf("unfinished headers: closed after %v (%v), want about headerTimeout (%v)", d, err, cfg.Gateway.HeaderTimeout)
	}

	// Nothing sent: closed after idleTimeout.
	silent := dial()
	if d, err := closedAfter(silent, cfg.Gateway.IdleTimeout+10*time.Second); err != nil || d < cfg.Gateway.IdleTimeout/2 {
		t.Errorf("silent connection: closed after %v (%v), want about idleTimeout (%v)", d, err, cfg.Gateway.IdleTimeout)
	}
}

// closedAfter reads c until the gateway closes it, at most bound, and
// returns how long that took.
func closedAfter(c net.Conn, bound time.Duration) (time.Duration, error) {
	start := time.Now()
	c.SetReadDeadline(start.Add(bound))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return time.Since(start), fmt.Errorf("still open after %v", bound)
	}
	return time.Since(start), nil
}
