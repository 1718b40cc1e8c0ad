package bridge

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// TestBridgeCompactsServerMessages: a server that pretty-prints its
// replies, as a JSON body or as an SSE event whose data spans several
// lines, still gets one stdout line per message, with string contents
// (escaped newlines, spaces) byte for byte. Before, a pretty-printed reply
// went out as several lines.
func TestBridgeCompactsServerMessages(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if err != nil || msg.Kind != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		reply, _ := json.MarshalIndent(map[string]any{
			"jsonrpc": "2.0",
			"id":      json.RawMessage(msg.Bytes(msg.ID)),
			"result":  map[string]any{"protocolVersion": "2025-06-18", "text": "a  b\nc", "list": []int{1, 2}},
		}, "", "  ")
		if msg.MethodIs("sse") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: " + strings.ReplaceAll(string(reply), "\n", "\ndata: ") + "\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply)
	}))
	defer ts.Close()
	in, out, done := runBridge(t, t.Context(), remote.Config{URL: ts.URL + "/mcp"})
	io.WriteString(in, initLine+`{"jsonrpc":"2.0","id":2,"method":"sse"}`+"\n"+`{"jsonrpc":"2.0","id":3,"method":"json"}`+"\n")
	out.wait(t, `"id":2,`)
	out.wait(t, `"id":3,`)
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines := out.lines()
	if len(lines) != 3 {
		t.Fatalf("%d lines for 3 replies:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if _, err := jsonrpc.Parse([]byte(l)); err != nil {
			t.Errorf("stdout line is not JSON-RPC: %q", l)
		}
		if !strings.Contains(l, `"text":"a  b\nc"`) || !strings.Contains(l, `"list":[1,2]`) {
			t.Errorf("line %s", l)
		}
	}
}
