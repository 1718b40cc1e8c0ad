package eras

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// benchmarkStatelessChecks runs what the front does to a stateless
// tools/call before routing it (IsModern, then Check) on a message whose
// argument is size bytes long.
func benchmarkStatelessChecks(b *testing.B, size int) {
	raw := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` +
		strings.Repeat("x", size) + `"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"progressToken":"tok"}}}`)
	msg, err := jsonrpc.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{}
	h.Set("Mcp-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", "echo")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if !IsModern("2026-07-28", &msg) {
			b.Fatal("not modern")
		}
		if _, prob := Check(h, &msg); prob != nil {
			b.Fatal(prob)
		}
	}
}

func BenchmarkStatelessChecks1KB(b *testing.B)  { benchmarkStatelessChecks(b, 1<<10) }
func BenchmarkStatelessChecks64KB(b *testing.B) { benchmarkStatelessChecks(b, 64<<10) }
