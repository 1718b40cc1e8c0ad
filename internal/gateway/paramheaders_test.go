package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// paramPost POSTs a 2026-07-28 request (params given without _meta) with
// the standard headers and extra ones, and returns the status and the
// reply, the last message of an SSE stream or the JSON body.
func paramPost(t *testing.T, g *testGateway, server, method, name, params string, extra map[string]string) (int, rpc) {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = strings.TrimSuffix(params, "}") + "," + meta + "}"
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/servers/"+server+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		raw = []byte(strings.TrimPrefix(lines[len(lines)-1], "data: "))
	}
	return resp.StatusCode, decode(t, raw)
}

// A tool whose inputSchema marks "message" with x-mcp-header: the gateway
// refuses a 2026-07-28 call whose Mcp-Param-Message header disagrees with
// the argument (400, -32020), whatever kind of upstream serves it: the
// server, a stdio process, never sees the header. Before, every call went
// through.
func TestParamHeadersValidatedForEveryUpstream(t *testing.T) {
	for _, setup := range []struct {
		name string
		opts testkit.FakeOptions
		edit func(s *config.Server)
	}{
		{name: "shared translated"},
		{name: "shared 2026-07-28 process", opts: testkit.FakeOptions{Modern: true}},
		{name: "session isolation", edit: func(s *config.Server) { s.Isolation = config.IsolationSession }},
	} {
		t.Run(setup.name, func(t *testing.T) {
			opts := setup.opts
			opts.Catalog.HeaderTools = []string{"where"}
			s := fakeServer("p", opts)
			if setup.edit != nil {
				setup.edit(s)
			}
			g := startGateway(t, newConfig(s))

			status, list := paramPost(t, g, "p", "tools/list", "", "", nil)
			if status != http.StatusOK || list.Error != nil || !strings.Contains(string(list.Result), `"x-mcp-header":"Message"`) {
				t.Fatalf("tools/list: %d %s %+v", status, list.Result, list.Error)
			}
			call := func(message string, headers map[string]string) (int, rpc) {
				t.Helper()
				args, _ := json.Marshal(map[string]string{"message": message})
				return paramPost(t, g, "p", "tools/call", "where", `{"name":"where","arguments":`+string(args)+`}`, headers)
			}
			for _, tc := range []struct {
				what    string
				message string
				headers map[string]string
				ok      bool
			}{
				{"header agrees", "hi", map[string]string{"Mcp-Param-Message": "hi"}, true},
				{"base64 form agrees", "héllo", map[string]string{"Mcp-Param-Message": "=?base64?aMOpbGxv?="}, true},
				{"lowercase header name", "hi", map[string]string{"mcp-param-message": "hi"}, true},
				{"header missing", "hi", nil, false},
				{"header differs", "hi", map[string]string{"Mcp-Param-Message": "ho"}, false},
				{"bad base64", "hi", map[string]string{"Mcp-Param-Message": "=?base64?aGk?="}, false},
			} {
				status, m := call(tc.message, tc.headers)
				switch {
				case tc.ok && (status != http.StatusOK || m.Error != nil || !strings.Contains(string(m.Result), "where: "+tc.message)):
					t.Errorf("%s: %d %s %+v, want the tool's answer", tc.what, status, m.Result, m.Error)
				case !tc.ok && (status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32020):
					t.Errorf("%s: %d %s %+v, want 400 and -32020", tc.what, status, m.Result, m.Error)
				}
			}
		})
	}
}

// A call to a tool no relayed tools/list has named yet (a client that kept
// the schema from before the gateway started) is checked all the same:
// the gateway lists the server's tools itself first, on both the
// translated and the 2026-07-28 path. Before, it went through unchecked.
func TestParamHeadersCheckedBeforeAnyList(t *testing.T) {
	for _, setup := range []struct {
		name string
		opts testkit.FakeOptions
	}{
		{name: "translated"},
		{name: "2026-07-28 process", opts: testkit.FakeOptions{Modern: true}},
	} {
		t.Run(setup.name, func(t *testing.T) {
			opts := setup.opts
			opts.Catalog.HeaderTools = []string{"where"}
			opts.Catalog.ToolPageSize = 3 // "where" is on a later page
			g := startGateway(t, newConfig(fakeServer("p", opts)))
			call := `{"name":"where","arguments":{"message":"hi"}}`
			if status, m := paramPost(t, g, "p", "tools/call", "where", call, map[string]string{"Mcp-Param-Message": "ho"}); status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32020 {
				t.Errorf("first call, header differs: %d %s %+v, want 400 and -32020", status, m.Result, m.Error)
			}
			if status, m := paramPost(t, g, "p", "tools/call", "where", call, map[string]string{"Mcp-Param-Message": "hi"}); status != http.StatusOK || m.Error != nil {
				t.Errorf("header agrees: %d %s %+v", status, m.Result, m.Error)
			}
		})
	}
}
