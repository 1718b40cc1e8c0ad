package echoserver

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestHooks(t *testing.T) {
	const (
		big      = `{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"big","arguments":{"bytes":3}}}`
		pretty   = `{"jsonrpc":"2.0","id":"x\u00e9","method":"tools/call","params":{"name":"pretty","arguments":{"message":"a\nb"}}}`
		progress = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"t"},"name":"progress","arguments":{"message":"m","count":2}}}`
	)
	tests := []struct {
		name, msg string
		lines     bool
		want      string
	}{
		{"big", big, true, `{"jsonrpc":"2.0","id":1.0,"result":{"content":[{"type":"text","text":"xxx"}]}}`},
		{"big, too big", strings.Replace(big, "3", "1e9", 1), true, `{"jsonrpc":"2.0","id":1.0,"error":{"code":-32602,"message":"arguments.bytes must be an integer from 0 to 15728640"}}`},
		{"pretty on stdio", pretty, true, "{\t  \"jsonrpc\": \"2.0\",\t  \"id\": \"x\\u00e9\",\t  \"result\": {\t    \"content\": [\t      {\t        \"type\": \"text\",\t        \"text\": \"a\\nb\"\t      }\t    ]\t  }\t}"},
		{"pretty over HTTP", pretty, false, "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": \"x\\u00e9\",\n  \"result\": {\n    \"content\": [\n      {\n        \"type\": \"text\",\n        \"text\": \"a\\nb\"\n      }\n    ]\n  }\n}"},
		{"progress on stdio", progress, true, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"total":2}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":2,"total":2}}` + "\n" +
			`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"m"}]}}`},
		{"progress over HTTP", progress, false, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"m"}]}}`},
		{"progress without a token", strings.Replace(progress, `"_meta":{"progressToken":"t"},`, "", 1), true, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"m"}]}}`},
		{"a stateless request reaches no hook", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"big","arguments":{"bytes":3}}}`, true,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool big"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, replied := appendReply(nil, []byte(tt.msg), tt.lines, nil)
			if !replied || string(got) != tt.want {
				t.Errorf("appendReply(%s, %v)\n = %s\nwant %s", tt.msg, tt.lines, got, tt.want)
			}
		})
	}
	// The hooks are not listed: tools/list stays one tool.
	got, _, _ := AppendReply(nil, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	if strings.Contains(string(got), `"big"`) || strings.Contains(string(got), `"progress"`) {
		t.Errorf("tools/list lists a hook: %s", got)
	}
}

// FuzzAppendReplyLines: on stdio, whatever the message, every line the
// fixture writes is one valid JSON value, and the reply to a request is
// the last.
func FuzzAppendReplyLines(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":10}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pretty","arguments":{"message":"a\u2028"}}}`,
		`{"jsonrpc":"2.0","id":[],"method":"tools/call","params":{"_meta":{"progressToken":{"a":[1]}},"name":"progress","arguments":{"message":"m","count":3}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{"message":"m","count":-1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if bytes.IndexByte(msg, '\n') >= 0 {
			return // not a line: ServeStdio never passes one
		}
		out, _, replied := appendReply(nil, msg, true, nil)
		if !replied {
			return
		}
		for line := range bytes.SplitSeq(out, []byte("\n")) {
			if !jsontext.Value(line).IsValid() {
				t.Fatalf("a line written for %q is not valid JSON: %q", msg, line)
			}
		}
	})
}
