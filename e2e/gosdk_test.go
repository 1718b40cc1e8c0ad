package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKClientBothEras connects the official Go SDK's client to the
// gateway (the conformance server behind it, shared): once negotiating the
// stateless revision 2026-07-28 (the SDK's default: server/discover first,
// then self-contained requests; a tool that asks for sampling goes through
// input_required and the SDK's automatic retry), once pinned to the session
// era 2025-11-25 (initialize, a session). Both must list tools, call one,
// and get sampling answered by the client's handler.
func TestGoSDKClientBothEras(t *testing.T) {
	requirePeers(t, everythingServer)
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"everything": {Command: everythingServer},
	}})
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sampled := 0
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					sampled++
					return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e", Content: &mcp.TextContent{Text: "sampled by e2e"}}, nil
				},
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/servers/everything/mcp", DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Errorf("negotiated %q, want %q", got, version)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) == 0 {
				t.Fatalf("tools/list: %v %+v", err, tools)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
			if err != nil || res.IsError || len(res.Content) == 0 {
				t.Fatalf("test_simple_text: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "hello"}})
			if err != nil || res.IsError {
				t.Fatalf("test_sampling: %v %+v", err, res)
			}
			text := ""
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text += tc.Text
				}
			}
			if sampled != 1 || !strings.Contains(text, "sampled by e2e") {
				t.Errorf("test_sampling: %d sampling requests, result %q", sampled, text)
			}
		})
	}
}
