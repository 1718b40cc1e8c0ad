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
		{"not an echo", reply("9", []byte("ok")), errNotEchoed},
		{"empty text", reply("9", nil), errNotEchoed},
		{"wrapped echo", reply("9", append([]byte("Echo: "), msg...)), errMangled},
		{"another call of the caller", reply("9", []byte("n-s0-c0-51")), errCrossed},
		{"another caller's, wrapped", reply("9", []byte("Echo: n-s0-c1-5")), errCrossed},
	}
	for _, tt := range tests {
		err := checkEcho(tt.reply, 9, msg, unique, false)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestCheckEchoStateless: a stateless call's result must say it is
// complete, wherever resultType stands; a crossed reply stays crossed.
func TestCheckEchoStateless(t *testing.T) {
	msg := []byte("n-s0-c0-5")
	tests := []struct {
		name  string
		reply string
		want  error
	}{
		{"complete first", `{"jsonrpc":"2.0","id":9,"result":{"resultType":"complete","content":[{"type":"text","text":"n-s0-c0-5"}]}}`, nil},
		{"complete last, extra members", `{"id":9,"result":{"content":[{"text":"n-s0-c0-5","type":"text","x":[1,{"text":"no"}]},{"type":"text","text":"second"}],"isError":false,"resultType":"complete"},"jsonrpc":"2.0"}`, nil},
		{"no resultType", `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"n-s0-c0-5"}]}}`, errResultType},
		{"input_required", `{"jsonrpc":"2.0","id":9,"result":{"resultType":"input_required","content":[{"type":"text","text":"n-s0-c0-5"}]}}`, errResultType},
		{"crossed", `{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":"n-s0-c0-4"}]}}`, errCrossed},
	}
	for _, tt := range tests {
		err := checkEcho([]byte(tt.reply), 9, msg, len(msg), true)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	// A session's call does not look at resultType.
	if err := checkEcho([]byte(tests[2].reply), 9, msg, len(msg), false); err != nil {
		t.Errorf("session call: %v", err)
	}
}

func TestEchoResult(t *testing.T) {
	tests := []struct{ raw, text, resultType string }{
		{`{"result":{"content":[{"text":"a\"b"}],"resultType":"complete"}}`, `a"b`, "complete"},
		{`{"result":{"content":[],"resultType":7}}`, "", ""},
		{`{"result":{"content":{"text":"x"}}}`, "", ""},
		{`{"error":{"code":1},"result":null}`, "", ""},
		{`{"result":{"content":[{"text":"x"}]}}`, "x", ""},
	}
	for _, tt := range tests {
		text, rt, err := echoResult([]byte(tt.raw))
		if err != nil || string(text) != tt.text || string(rt) != tt.resultType {
			t.Errorf("echoResult(%s) = %q, %q, %v", tt.raw, text, rt, err)
		}
	}
	if _, _, err := echoResult([]byte(`{"result":{"content":[{"text":"x"`)); err == nil {
		t.Error("truncated reply: no error")
	}
}

// FuzzEchoResult: the one-pass reading of a reply finds what lookup finds
// path by path.
func FuzzEchoResult(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":9,"result":{"resultType":"complete","content":[{"type":"text","text":"a\"b"}]}}`,
		`{"result":{"content":[{"text":"x"},{"text":"y"}],"resultType":"complete"}}`,
		`{"result":{"content":[[1],{"text":"x"}],"resultType":null}}`,
		`{"result":[],"error":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		text, rt, err := echoResult(raw)
		wantText, err1 := lookup(raw, "result", "content", "[0]", "text")
		wantRT, err2 := lookup(raw, "result", "resultType")
		if err != nil || err1 != nil || err2 != nil {
			return // lookup stops at what it finds; echoResult reads on, and may fail later
		}
		if !bytes.Equal(text, wantText) || !bytes.Equal(rt, wantRT) {
			t.Fatalf("echoResult(%q) = %q, %q; lookup finds %q, %q", raw, text, rt, wantText, wantRT)
		}
	})
}

// TestWhose: what message of the run a text carries.
func TestWhose(t *testing.T) {
	msg := []byte("n7-s0-c0-5")
	for _, tt := range []struct {
		text string
		want int
	}{
		{"n7-s0-c0-5", echoOwn},
		{"n7-s0-c0-5.0123", echoOwn},
		{"Echo: n7-s0-c0-5", echoOwn},
		{"n7-s0-c0-51 then n7-s0-c0-5!", echoOwn},
		{"n7-s0-c0-51", echoOther},
		{"n7-s1-c0-5", echoOther},
		{"Echo: n7-s2-open", echoOther},
		{"ok", echoNone},
		{"", echoNone},
		{"n8-s0-c0-5", echoNone},
	} {
		if got := whose([]byte(tt.text), msg, len(msg)); got != tt.want {
			t.Errorf("whose(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

// FuzzWhose: any text is classified without panicking; a text holding the
// message itself is the call's own, and one holding no part of the run's
// mark carries no message of the run.
func FuzzWhose(f *testing.F) {
	f.Add([]byte("Echo: n7-s0-c0-5"), []byte("n7-s0-c0-5"), 10)
	f.Add([]byte("n7-s0-c0-51"), []byte("n7-s0-c0-5.01"), 10)
	f.Add([]byte(""), []byte("x"), 1)
	f.Fuzz(func(t *testing.T, text, msg []byte, unique int) {
		if len(msg) == 0 || unique <= 0 || unique > len(msg) {
			return
		}
		if unique < len(msg) && msg[unique] >= '0' && msg[unique] <= '9' {
			return // not a message: filler starts with a period, never a digit
		}
		got := whose(text, msg, unique)
		if bytes.Equal(text, msg) && got != echoOwn {
			t.Fatalf("whose(%q, %q, %d) = %d for the message itself", text, msg, unique, got)
		}
		if !bytes.Contains(text, runMark(msg)) && !bytes.Contains(text, msg[:unique]) && got != echoNone {
			t.Fatalf("whose(%q, %q, %d) = %d without the run's mark", text, msg, unique, got)
		}
	})
}
