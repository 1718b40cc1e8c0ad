package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

func atkUpstream(t *testing.T, discover func(w http.ResponseWriter, r *http.Request, id []byte)) (string, *atomic.Int64) {
	var slow atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil || m.Kind != jsonrpc.KindRequest {
			http.Error(w, "bad", 400)
			return
		}
		id := m.Bytes(m.ID)
		switch {
		case m.MethodIs("server/discover") && string(id) == `"mcpgate-discover"`:
			discover(w, r, id)
		case r.Header.Get("Mcp-Name") == "slow":
			slow.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			slow.Add(-1)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write(jsonrpc.Response(id, []byte(`{"content":[]}`)))
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", &slow
}

func goodDiscover(w http.ResponseWriter, r *http.Request, id []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(jsonrpc.Response(id, []byte(`{"supportedVersions":["2026-07-28"],"capabilities":{}}`)))
}

func TestAttackBridgeBrokenProbeNotAVerdict(t *testing.T) {
	var first atomic.Bool
	first.Store(true)
	url, _ := atkUpstream(t, func(w http.ResponseWriter, r *http.Request, id []byte) {
		if first.Swap(false) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		}
		goodDiscover(w, r, id)
	})
	out := newSink()
	in, done := runBridgeWith(t, t.Context(), Options{Remote: remote.Config{URL: url}, Stdout: out, DrainTimeout: time.Second})
	io.WriteString(in, modernRequest("1", "tools/call", `"name":"json","arguments":{}`))
	out.wait(t, `"id":1,`)
	io.WriteString(in, modernRequest("2", "tools/call", `"name":"json","arguments":{}`))
	got := out.wait(t, `"id":2,`)
	in.Close()
	testkit.Receive(t, done, "Run to return")
	if strings.Contains(got, "-32022") {
		t.Errorf("after one broken probe the remote is treated as session-era for good: %s", got)
	}
}
