package loadgen

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/echoserver"
)

func TestBuildMessage(t *testing.T) {
	filler := newFiller(100)
	tests := []struct {
		size       int
		want       string
		wantUnique int
	}{
		{0, "p-42", 4},
		{3, "p-42", 4}, // smaller than the unique part: the unique part alone
		{4, "p-42", 4},
		{5, "p-42.", 4},
		{20, "p-42.0123456789abcde", 4},
	}
	for _, tt := range tests {
		got, unique := buildMessage([]byte("stale contents"), []byte("p-"), 42, tt.size, filler)
		if string(got) != tt.want || unique != tt.wantUnique {
			t.Errorf("size %d: %q, %d; want %q, %d", tt.size, got, unique, tt.want, tt.wantUnique)
		}
	}
	big := newFiller(1 << 20)
	msg, _ := buildMessage(nil, []byte("x-s0-c0-"), 7, 1<<20, big)
	if len(msg) != 1<<20 || !strings.HasPrefix(string(msg), "x-s0-c0-7.0123") || bytes.ContainsAny(msg, "\"\\\n") {
		t.Errorf("1 MiB message: %d bytes, starts %q", len(msg), msg[:20])
	}
}

// TestCheckEcho classifies replies built by the real fixture from the call
// sent, then altered.
func TestCheckEcho(t *testing.T) {
	msg, unique := buildMessage(nil, []byte("n-s0-c0-"), 5, 4096, newFiller(4096))
	other, _ := buildMessage(nil, []byte("n-s1-c0-"), 5, 4096, newFiller(4096))
	reply := func(id string, m []byte) []byte {
		r, _, _ := echoserver.AppendReply(nil, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`+string(m)+`"}}}`))
		return r
	}
	mangled := bytes.Clone(msg)
	mangled[len(mangled)-1] = '!'
	tests := []struct {
		name  string
		reply []byte
		want  error // nil, errCrossed, errMangled or errRPCError
	}{
		{"own", reply("9", msg), nil},
		{"other id", reply("8", msg), errCrossed},
		{"other session's text, same id", reply("9", other), errCrossed},
		{"truncated text", reply("9", msg[:len(msg)-1]), errMangled},
		{"damaged filler", reply("9", mangled), errMangled},
		{"error reply", []byte(`{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"x"}}`), errRPCError},
	}
	for _, tt := range tests {
		err := checkEcho(tt.reply, 9, msg, unique)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}
