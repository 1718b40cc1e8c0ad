package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Helpers of the aggregation e2e tests: the Go SDK client and list/set comparisons.

// sdkClient is a Go SDK client session that counts notifications/tools/list_changed.
type sdkClient struct {
	cs           *mcp.ClientSession
	toolsChanged chan struct{} // one value per notification, never blocking the SDK
}

// connectSDK connects the official Go SDK client to url negotiating version (the standalone
// SSE stream open in a session, subscriptions/listen in 2026-07-28), closing it at cleanup.
func connectSDK(t *testing.T, ctx context.Context, url, version string) *sdkClient {
	t.Helper()
	c := &sdkClient{toolsChanged: make(chan struct{}, 1000)}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-aggregate", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.toolsChanged <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to %s in %s: %v", url, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Errorf("%s: negotiated %q, want %q", url, got, version)
	}
	c.cs = cs
	return c
}

// drain forgets the notifications received so far.
func (c *sdkClient) drain() {
	for {
		select {
		case <-c.toolsChanged:
		default:
			return
		}
	}
}

// waitToolsChanged waits for a notifications/tools/list_changed, at most timeout.
func (c *sdkClient) waitToolsChanged(timeout time.Duration) bool {
	select {
	case <-c.toolsChanged:
		return true
	case <-time.After(timeout):
		return false
	}
}

// waitTools lists the tools until ok accepts the names, and returns them. A member that is not
// ready yet (the gateway listens before its servers have started) is hidden from the lists, and
// the client gets notifications/tools/list_changed once it is shown: so between listings this
// waits for that notification, not for time to pass, and fails if none comes within 60s.
func waitTools(t *testing.T, ctx context.Context, c *sdkClient, what string, ok func([]string) bool) []string {
	t.Helper()
	start := time.Now()
	for {
		names, _ := listTools(t, ctx, c.cs)
		if ok(names) {
			return names
		}
		if !c.waitToolsChanged(60 * time.Second) {
			t.Fatalf("%s: tools/list is %v, and no notifications/tools/list_changed came within 60s (%v since the first listing)",
				what, names, time.Since(start).Round(time.Millisecond))
		}
	}
}

// hasAll returns a waitTools condition: every name of want is listed.
func hasAll(want []string) func([]string) bool {
	return func(got []string) bool {
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}
}

// listTools lists every tool, page by page, failing on a repeated cursor; it returns the
// names in order, the tools by name and the number of pages.
func listTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession) ([]string, map[string]*mcp.Tool) {
	names, tools, _ := listToolPages(t, ctx, cs)
	return names, tools
}

func listToolPages(t *testing.T, ctx context.Context, cs *mcp.ClientSession) ([]string, map[string]*mcp.Tool, int) {
	t.Helper()
	var names []string
	tools := map[string]*mcp.Tool{}
	seen := map[string]bool{}
	params := &mcp.ListToolsParams{}
	for pages := 1; ; pages++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			t.Fatalf("tools/list (page %d, cursor %q): %v", pages, params.Cursor, err)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			tools[tool.Name] = tool
		}
		if res.NextCursor == "" {
			return names, tools, pages
		}
		if seen[res.NextCursor] || pages > 1000 {
			t.Fatalf("tools/list: cursor %q repeats", res.NextCursor)
		}
		seen[res.NextCursor] = true
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

func listPrompts(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		names = append(names, p.Name)
	}
	return names
}

func listResources(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	var uris []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		uris = append(uris, r.URI)
	}
	return uris
}

// outcome is what a tools/call got: a result (an error result if isError) or a JSON-RPC error.
type outcome struct {
	text    string // the result's text content
	isError bool   // the result's isError
	rpcErr  bool   // a JSON-RPC error
	code    int64
	msg     string
}

func (o outcome) failed() bool { return o.isError || o.rpcErr }

// message is the error's message, or the error result's text.
func (o outcome) message() string {
	if o.rpcErr {
		return o.msg
	}
	return o.text
}

func (o outcome) String() string {
	switch {
	case o.rpcErr:
		return fmt.Sprintf("JSON-RPC error %d %q", o.code, o.msg)
	case o.isError:
		return fmt.Sprintf("error result %q", o.text)
	}
	return fmt.Sprintf("result %q", o.text)
}

func callOutcome(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) outcome {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) {
			t.Fatalf("tools/call %s: not a JSON-RPC error: %v", name, err)
		}
		return outcome{rpcErr: true, code: werr.Code, msg: werr.Message}
	}
	var text []string
	for _, c := range res.Content {
		text = append(text, textContent(c))
	}
	return outcome{text: strings.Join(text, "\n"), isError: res.IsError}
}

// mustCall calls a tool and returns its text, failing the test on any error.
func mustCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	o := callOutcome(t, ctx, cs, name, args)
	if o.failed() {
		t.Fatalf("tools/call %s: %s", name, o)
	}
	return o.text
}

func textContent(c mcp.Content) string {
	if tc, ok := c.(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// setDiff describes how got differs from want as sets (and names duplicates), or returns "".
func setDiff(want, got []string) string {
	var missing, extra, dup []string
	count := map[string]int{}
	for _, g := range got {
		count[g]++
		if count[g] == 2 {
			dup = append(dup, g)
		}
	}
	for _, w := range want {
		if count[w] == 0 {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	if len(missing)+len(extra)+len(dup) == 0 {
		return ""
	}
	return fmt.Sprintf("missing %v, unexpected %v, listed twice %v (got %d: %v)", missing, extra, dup, len(got), got)
}

// seqDiff is setDiff, and also wants the same order when the sets agree.
func seqDiff(want, got []string) string {
	if d := setDiff(want, got); d != "" {
		return d
	}
	if !slices.Equal(want, got) {
		return fmt.Sprintf("same items in another order: %v, before %v", got, want)
	}
	return ""
}
