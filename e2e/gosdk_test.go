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
// and get sampling answered by the client's handler. The conformance server
// speaks both eras: the gateway finds that out (server/discover on a
// process of its own) and serves the stateless requests from it as they
// come, the sessions from the process it initialized.
func TestGoSDKClientBothEras(t *testing.T) {
	requirePeers(t, everythingServer)
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"everything": {Command: everythingServer},
		"legacy":     {Command: everythingServer, Protocol: "legacy"},
	}})
	for _, tc := range []struct{ server, version, tool string }{
		{"everything", "2026-07-28", "test_input_required_result_sampling"},
		{"everything", "2025-11-25", "test_input_required_result_sampling"},
		// Pinned to the session eras, the stateless requests are
		// translated, and the server's sampling request becomes
		// input_required at the gateway (the MRTR bridge).
		{"legacy", "2026-07-28", "test_sampling"},
	} {
		server, version := tc.server, tc.version
		t.Run(server+"/"+version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sampled := 0
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					sampled++
					return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e", Content: &mcp.TextContent{Text: "sampled by e2e"}}, nil
				},
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/servers/" + server + "/mcp", DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: version})
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
			// The server's tool asks for sampling with input_required; in a
			// session the SDK server turns that into a sampling request.
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"prompt": "hello"}})
			if err != nil || res.IsError {
				t.Fatalf("%s: %v %+v", tc.tool, err, res)
			}
			text := ""
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text += tc.Text
				}
			}
			if sampled != 1 || !strings.Contains(text, "sampled by e2e") {
				t.Errorf("%s: %d sampling requests, result %q", tc.tool, sampled, text)
			}
		})
	}
}
