package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attack tests of the stateless passthrough (front/stateless.go forward,
// backend/shared.go's second process, mux Options.Modern) over HTTP.

// init runs the test binary as a scripted dual-era server when
// GWATKFAKE is set: initialize and server/discover are answered (modern);
// subscriptions/listen is acknowledged, then ended by the server after
// 100ms with notifications/cancelled tagged with the subscriptionId, as
// "every notification on the listen stream carries the subscriptionId"
// allows.
func init() {
	if os.Getenv("GWATKFAKE") == "" {
		return
	}
	var mu sync.Mutex
	write := func(s string) {
		mu.Lock()
		os.Stdout.WriteString(s + "\n")
		mu.Unlock()
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil {
			continue
		}
		id := string(msg.ID)
		switch msg.Method {
		case "initialize":
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"resources":{"subscribe":true}},"serverInfo":{"name":"gwatk","version":"1"}}}`)
		case "server/discover":
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"resources":{"subscribe":true}}}}`)
		case "subscriptions/listen":
			write(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}}}`)
			go func() {
				time.Sleep(100 * time.Millisecond) // the server ends the listen on its own, a moment later
				write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"server ends it","_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}}}`)
			}()
		default:
			if msg.ID != nil && msg.Method != "" {
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"resultType":"complete"}}`)
			}
		}
	}
	os.Exit(0)
}

func modernRequest(ctx context.Context, g *testGateway, server, method, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/servers/"+server+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	return req
}

const gwAtkMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`

// TestAttackPassthroughListenEndedByTaggedCancel: the server ends a listen
// with a tagged notifications/cancelled: the client's SSE stream must end.
func TestAttackPassthroughListenEndedByTaggedCancel(t *testing.T) {
	exe, _ := os.Executable()
	marker := fmt.Sprintf("gwatk-%d", time.Now().UnixNano())
	srv := fakeServer("m", testkit.FakeOptions{})
	srv.Command, srv.Args = exe, []string{"-test.run=^$", "-gwatk=" + marker}
	srv.Env = map[string]string{"GWATKFAKE": "1", "GORACE": "atexit_sleep_ms=0"}
	srv.Protocol = config.ProtocolModern
	g := startGateway(t, newConfig(srv))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"resourcesListChanged":true},` + gwAtkMeta + `}}}`
	resp, err := g.http.Do(modernRequest(ctx, g, "m", "subscriptions/listen", body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	raw, err := io.ReadAll(resp.Body)
	t.Logf("status %d after %v: %q (err %v)", resp.StatusCode, time.Since(start), raw, err)
	if err != nil {
		t.Errorf("the listen's stream did not end after the server's (tagged) notifications/cancelled: %v after %v; got %q", err, time.Since(start), raw)
	}
	if bytes.Contains(raw, []byte(`"requestId":1`)) || bytes.Contains(raw, []byte(`"requestId":2`)) {
		t.Errorf("the client saw the gateway's upstream id: %q", raw)
	}
}
