package jsonrpc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		kind     Kind
		id       string // raw bytes expected, "" = absent
		method   string // unquoted
		progress string
		cancel   string
		task     string
		isError  bool
	}{
		{name: "task-augmented request", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{"ttl":6000}}}`,
			kind: KindRequest, id: `1`, method: "tools/call", task: `{"ttl":6000}`},
		{name: "task with an escaped name, null", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"\u0074ask":null}}`,
			kind: KindRequest, id: `1`, method: "tools/call", task: `null`},
		{name: "task only in params", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"task":1},"_meta":{"task":2}}}`,
			kind: KindRequest, id: `1`, method: "tools/call"},
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			kind: KindRequest, id: `1`, method: "tools/list"},
		{name: "request with params array", in: `{"jsonrpc":"2.0","id":"a","method":"m","params":[1,2]}`,
			kind: KindRequest, id: `"a"`, method: "m"},
		{name: "keys in any order with whitespace", in: " \n{ \"method\" : \"ping\" ,\t\"id\" : 7 , \"jsonrpc\" : \"2.0\" }\r\n ",
			kind: KindRequest, id: `7`, method: "ping"},
		{name: "notification", in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			kind: KindNotification, method: "notifications/initialized"},
		{name: "response", in: `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}`,
			kind: KindResponse, id: `3`},
		{name: "response with null result", in: `{"jsonrpc":"2.0","id":3,"result":null}`,
			kind: KindResponse, id: `3`},
		{name: "error response", in: `{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}`,
			kind: KindResponse, id: `"x"`, isError: true},
		{name: "error response with null id", in: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`,
			kind: KindResponse, id: `null`, isError: true},
		{name: "progress token string", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"tok-1"},"arguments":{"a":[1,{"b":null}]}}}`,
			kind: KindRequest, id: `1`, method: "tools/call", progress: `"tok-1"`},
		{name: "progress token number", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"x":1,"progressToken":42}}}`,
			kind: KindRequest, id: `1`, method: "tools/call", progress: `42`},
		{name: "progress token of another type ignored", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":{}}}}`,
			kind: KindRequest, id: `1`, method: "m"},
		{name: "progress token only under _meta", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"progressToken":1,"a":{"_meta":{"progressToken":2}}}}`,
			kind: KindRequest, id: `1`, method: "m"},
		{name: "progress notification", in: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
			kind: KindNotification, method: "notifications/progress", progress: `"t"`},
		{name: "progress notification, method last", in: `{"jsonrpc":"2.0","params":{"progress":1,"progressToken":77},"method":"notifications/progress"}`,
			kind: KindNotification, method: "notifications/progress", progress: `77`},
		{name: "cancelled", in: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r-9","reason":"x"}}`,
			kind: KindNotification, method: "notifications/cancelled", cancel: `"r-9"`},
		{name: "cancelled with method after params", in: `{"jsonrpc":"2.0","params":{"requestId":12},"method":"notifications/cancelled"}`,
			kind: KindNotification, method: "notifications/cancelled", cancel: `12`},
		{name: "requestId ignored for other methods", in: `{"jsonrpc":"2.0","method":"notifications/other","params":{"requestId":12}}`,
			kind: KindNotification, method: "notifications/other"},
		{name: "escaped keys", in: `{"\u006asonrpc":"2\u002e0","\u0069d":5,"meth\u006fd":"m","params":{"\u005fmeta":{"progress\u0054oken":"p"}}}`,
			kind: KindRequest, id: `5`, method: "m", progress: `"p"`},
		{name: "escaped method", in: `{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":1}}`,
			kind: KindNotification, method: "notifications/cancelled", cancel: `1`},
		{name: "unknown members kept", in: `{"jsonrpc":"2.0","id":1,"method":"m","extra":{"a":[true,false]}}`,
			kind: KindRequest, id: `1`, method: "m"},
		{name: "same key at different depths", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"id":2,"x":{"id":3}}}`,
			kind: KindRequest, id: `1`, method: "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if m.Kind != tt.kind {
				t.Errorf("Kind = %v, want %v", m.Kind, tt.kind)
			}
			if got := string(m.Bytes(m.ID)); got != tt.id {
				t.Errorf("ID = %q, want %q", got, tt.id)
			}
			if got := m.MethodName(); got != tt.method {
				t.Errorf("MethodName = %q, want %q", got, tt.method)
			}
			if tt.method != "" && !m.MethodIs(tt.method) {
				t.Errorf("MethodIs(%q) = false", tt.method)
			}
			if m.MethodIs(tt.method + "x") {
				t.Errorf("MethodIs(%q) = true", tt.method+"x")
			}
			if got := string(m.Bytes(m.ProgressToken)); got != tt.progress {
				t.Errorf("ProgressToken = %q, want %q", got, tt.progress)
			}
			if got := string(m.Bytes(m.CancelRequestID)); got != tt.cancel {
				t.Errorf("CancelRequestID = %q, want %q", got, tt.cancel)
			}
			if got := string(m.Bytes(m.Task)); got != tt.task {
				t.Errorf("Task = %q, want %q", got, tt.task)
			}
			if m.IsError != tt.isError {
				t.Errorf("IsError = %v, want %v", m.IsError, tt.isError)
			}
			if string(m.Raw) != tt.in {
				t.Errorf("Raw changed")
			}
		})
	}
}

func TestParseMethodSpanIncludesQuotes(t *testing.T) {
	m, err := Parse([]byte(`{"jsonrpc":"2.0","method":"a\"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.Bytes(m.Method)); got != `"a\"b"` {
		t.Errorf("Method bytes = %s", got)
	}
	if got := m.MethodName(); got != `a"b` {
		t.Errorf("MethodName = %q", got)
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
		msg  string // substring of the error text
	}{
		{"empty", ``, ErrParse, "unexpected end"},
		{"whitespace only", " \n ", ErrParse, "unexpected end"},
		{"truncated", `{"jsonrpc":"2.0","id":1`, ErrParse, "unexpected end"},
		{"garbage", `hello`, ErrParse, ""},
		{"trailing data", `{"jsonrpc":"2.0","method":"m"} x`, ErrParse, "trailing data after message"},
		{"two objects", `{"jsonrpc":"2.0","method":"m"}{"jsonrpc":"2.0","method":"m"}`, ErrParse, "trailing data"},
		{"trailing comma", `{"jsonrpc":"2.0","method":"m",}`, ErrParse, ""},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, ErrParse, `duplicate key "id"`},
		{"duplicate escaped id", `{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"m"}`, ErrParse, `duplicate key "id"`},
		{"duplicate in params", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{"b":1},"a":2}}`, ErrParse, `duplicate key "a" in /params`},
		{"duplicate escaped in params", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"request\u0049d":2}}`, ErrParse, `duplicate key "requestId" in /params`},
		{"duplicate in _meta", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1,"progressToken":2}}}`, ErrParse, `duplicate key "progressToken" in /params/_meta`},
		{"duplicate unknown top-level key", `{"jsonrpc":"2.0","id":1,"method":"m","x":1,"x":2}`, ErrParse, `duplicate key "x"`},
		{"invalid utf8 in value", "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[\"\xff\"]}", ErrParse, "UTF-8"},
		{"invalid utf8 in key", "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"\xc3\":1}", ErrParse, "UTF-8"},
		{"parse error beats invalid request", `{"jsonrpc":"1.0","id":1,"method":"m",}`, ErrParse, ""},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"m"}`, ErrInvalidRequest, `"jsonrpc" must be "2.0"`},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"m"}`, ErrInvalidRequest, `"jsonrpc" must be "2.0"`},
		{"jsonrpc missing", `{"id":1,"method":"m"}`, ErrInvalidRequest, `missing "jsonrpc"`},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"m"}`, ErrInvalidRequest, `"id" must be a string or number`},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"m"}`, ErrInvalidRequest, `"id" must be a string or number`},
		{"id bool", `{"jsonrpc":"2.0","id":true,"result":{}}`, ErrInvalidRequest, `"id" must be a string or number`},
		{"id null in request", `{"jsonrpc":"2.0","id":null,"method":"m"}`, ErrInvalidRequest, `must not be null`},
		{"id null in result response", `{"jsonrpc":"2.0","id":null,"result":{}}`, ErrInvalidRequest, `null only in an error response`},
		{"method number", `{"jsonrpc":"2.0","id":1,"method":1}`, ErrInvalidRequest, `"method" must be a string`},
		{"method null", `{"jsonrpc":"2.0","method":null}`, ErrInvalidRequest, `"method" must be a string`},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, ErrInvalidRequest, `"params" must be an object or array`},
		{"params null", `{"jsonrpc":"2.0","method":"m","params":null}`, ErrInvalidRequest, `"params" must be an object or array`},
		{"request with result", `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, ErrInvalidRequest, `must not carry "result" or "error"`},
		{"notification with error", `{"jsonrpc":"2.0","method":"m","error":{}}`, ErrInvalidRequest, `must not carry`},
		{"response with both", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}`, ErrInvalidRequest, `exactly one of`},
		{"response with neither", `{"jsonrpc":"2.0","id":1}`, ErrInvalidRequest, `exactly one of`},
		{"error not object", `{"jsonrpc":"2.0","id":1,"error":"bad"}`, ErrInvalidRequest, `"error" must be an object`},
		{"no method no id", `{"jsonrpc":"2.0","result":{}}`, ErrInvalidRequest, `missing "method"`},
		{"empty object", `{}`, ErrInvalidRequest, ``},
		{"batch", `[{"jsonrpc":"2.0","method":"m"}]`, ErrInvalidRequest, `SplitBatch`},
		{"malformed batch", `[{"jsonrpc":"2.0","method":"m"}`, ErrParse, ``},
		{"string", `"hello"`, ErrInvalidRequest, `must be a JSON object`},
		{"null", `null`, ErrInvalidRequest, `must be a JSON object`},
		{"number with trailing", `1 2`, ErrParse, `trailing data`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %q does not wrap %v", err, tt.want)
			}
			other := ErrParse
			if tt.want == ErrParse {
				other = ErrInvalidRequest
			}
			if errors.Is(err, other) {
				t.Fatalf("error %q wraps both sentinels", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

// TestParseIDsByteForByte checks invariant 3: a client gets its own id back
// byte for byte, whatever its shape.
func TestParseIDsByteForByte(t *testing.T) {
	ids := []string{
		`0`, `-0`, `1`, `-1`, `12345678901234567890123`, `-12345678901234567890123.000001`,
		`1e400`, `-1E-400`, `0.1`, `1.0`, `1e+2`, `9007199254740993`,
		`""`, `"a"`, `"with \"quotes\" and \\ backslash"`, `"\u00e9\ud83d\ude00"`, `"é😀"`,
		`"\/\b\f\n\r\t"`, `"` + strings.Repeat("x", 300) + `"`,
	}
	for _, id := range ids {
		for _, shape := range []string{
			`{"jsonrpc":"2.0","id":%s,"method":"m"}`,
			`{"jsonrpc":"2.0","id": %s ,"result":{}}`,
			`{"id":%s,"jsonrpc":"2.0","error":{"code":1,"message":"m"}}`,
		} {
			in := strings.Replace(shape, "%s", id, 1)
			m, err := Parse([]byte(in))
			if err != nil {
				t.Fatalf("Parse(%s): %v", in, err)
			}
			if got := string(m.Bytes(m.ID)); got != id {
				t.Errorf("Parse(%s): ID = %s, want %s", in, got, id)
			}
		}
	}
}

func TestCode(t *testing.T) {
	_, perr := Parse([]byte(`{`))
	_, ierr := Parse([]byte(`{}`))
	for _, tt := range []struct {
		err  error
		want int
	}{{perr, protocol.CodeParseError}, {ierr, protocol.CodeInvalidRequest}, {errors.New("x"), protocol.CodeInternalError}} {
		if got := Code(tt.err); got != tt.want {
			t.Errorf("Code(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestParseDoesNotModifyInput(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":"t"},"a":[1,2,{"b":"c"}]}}`)
	want := string(in)
	for range 3 {
		if _, err := Parse(in); err != nil {
			t.Fatal(err)
		}
	}
	if string(in) != want {
		t.Fatalf("input modified: %s", in)
	}
}

func TestMethodNameAliasesRaw(t *testing.T) {
	m, err := Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if m.MethodName() != "notifications/resources/list_changed" || !m.MethodIs("notifications/resources/list_changed") {
			t.Fatal("mismatch")
		}
	}); n != 0 {
		t.Errorf("MethodName/MethodIs allocated %v times", n)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindRequest: "request", KindNotification: "notification", KindResponse: "response", 0: "invalid"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q", k, k.String())
		}
	}
}

// TestParseForwardsDuplicatesInPassedThroughValues: duplicate keys are
// checked only in the objects Parse reads; inside arguments, result or
// error.data they are the receiver's business, and the message goes through
// untouched.
func TestParseForwardsDuplicatesInPassedThroughValues(t *testing.T) {
	for _, tt := range []struct{ in, id, progress string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p"},"arguments":{"a":1,"a":2,"b":{"c":1,"\u0063":2}}}}`, `1`, `"p"`},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{"b":1,"b":2}}}`, `1`, ``},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"x":{"y":1,"y":1}}}}`, `1`, ``},
		{`{"jsonrpc":"2.0","id":2,"result":{"x":1,"x":1}}`, `2`, ``},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m","data":{"k":1,"k":2}}}`, `3`, ``},
		{`{"jsonrpc":"2.0","id":4,"method":"m","extra":{"k":1,"k":2}}`, `4`, ``},
	} {
		in := []byte(tt.in)
		m, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%s): %v", tt.in, err)
			continue
		}
		if string(m.Raw) != tt.in || string(m.Bytes(m.ID)) != tt.id || string(m.Bytes(m.ProgressToken)) != tt.progress {
			t.Errorf("Parse(%s) = %+v", tt.in, m)
		}
	}
}

// TestParseRejectsInvalidJSONDeepInside: what Parse passes through is still
// checked to be valid JSON, so that a peer never receives broken JSON.
func TestParseRejectsInvalidJSONDeepInside(t *testing.T) {
	wrap := func(s string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":[{"b":` + s + `}]}}}`
	}
	for _, tt := range []struct{ name, value, msg string }{
		{"invalid UTF-8", "\"" + strings.Repeat("x", 100) + "\xff\"", "UTF-8"},
		{"truncated UTF-8", "\"\xe6\x97\"", "UTF-8"},
		{"UTF-8 surrogate", "\"\xed\xa0\x80\"", "UTF-8"},
		{"lone high surrogate escape", `"\ud800"`, "escape"},
		{"lone low surrogate escape", `"\udc00"`, "escape"},
		{"high surrogate then not low", `"\ud800\u0041"`, "escape"},
		{"bad escape", `"\x41"`, "escape"},
		{"short unicode escape", `"\u12g4"`, "escape"},
		{"control character", "\"a\x01b\"", "control character"},
		{"newline in string", "\"a\nb\"", "control character"},
		{"leading zero", `01`, "invalid character"},
		{"bare minus", `-`, "invalid character"},
		{"bad literal", `nul`, "invalid character"},
		{"trailing comma", `[1,]`, "invalid character"},
		{"missing colon", `{"a" 1}`, "invalid character"},
	} {
		in := wrap(tt.value)
		_, err := Parse([]byte(in))
		if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: Parse(%q) = %v, want a parse error mentioning %q", tt.name, in, err, tt.msg)
		}
	}
	// A valid surrogate pair, in either case, is fine.
	if _, err := Parse([]byte(wrap(`"\ud83d\ude00\uD83D\uDE00"`))); err != nil {
		t.Errorf("surrogate pair: %v", err)
	}
}

// TestParseEveryPrefix: a message cut anywhere is a parse error.
func TestParseEveryPrefix(t *testing.T) {
	msgs := [][]byte{
		request(1 << 10),
		echoRequest(200, true),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":-1.5e3,"_meta":{"progressToken":"\u00e9"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m","data":[true,false,null]}}`),
	}
	for _, msg := range msgs {
		if _, err := Parse(msg); err != nil {
			t.Fatalf("Parse(%s): %v", msg, err)
		}
		for n := range len(msg) {
			if _, err := Parse(msg[:n]); !errors.Is(err, ErrParse) {
				t.Fatalf("Parse(%q) = %v, want a parse error", msg[:n], err)
			}
		}
	}
}

// TestParseDeepNesting: nesting is limited to 10000 levels, as jsontext
// limits it, and far deeper input is refused quickly, without recursion.
func TestParseDeepNesting(t *testing.T) {
	nested := func(n int) []byte {
		// The message and params are two of the n levels.
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"arguments":` +
			strings.Repeat("[", n-2) + strings.Repeat("]", n-2) + `}}`)
	}
	if _, err := Parse(nested(maxDepth)); err != nil {
		t.Errorf("%d levels: %v", maxDepth, err)
	}
	if _, err := refParse(nested(maxDepth + 1)); !errors.Is(err, ErrParse) {
		t.Errorf("%d levels: the reference parser says %v", maxDepth+1, err)
	}
	if _, err := Parse(nested(maxDepth + 1)); !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "nesting") {
		t.Errorf("%d levels: %v, want a parse error about nesting", maxDepth+1, err)
	}
	// Refused quickly: the parse stops at the '[' one past maxDepth (two
	// objects are open around the arguments), whatever follows it, so its
	// work is that of a maxDepth-deep value, not of 100000 levels.
	prefix := `{"jsonrpc":"2.0","id":1,"method":"m","params":{"arguments":`
	deep := []byte(prefix + strings.Repeat("[", 100000))
	at := fmt.Sprintf("at offset %d", len(prefix)+maxDepth-2)
	if _, err := Parse(deep); !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), at) {
		t.Errorf("100000 '[': %v, want a parse error %s", err, at)
	}
}

// TestParseParamsAndMeta: Params locates params when it is an object or an
// array, Meta params._meta when it is an object; a response has neither.
func TestParseParamsAndMeta(t *testing.T) {
	for _, tc := range []struct{ in, params, meta string }{
		{`{"jsonrpc":"2.0","id":1,"method":"m","params": {"a":1, "_meta" : {"k":"v"} } }`, `{"a":1, "_meta" : {"k":"v"} }`, `{"k":"v"}`},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":"not an object"}}`, `{"_meta":"not an object"}`, ``},
		{`{"jsonrpc":"2.0","method":"m","params":[1,{"_meta":{}}]}`, `[1,{"_meta":{}}]`, ``},
		{`{"jsonrpc":"2.0","id":1,"method":"m"}`, ``, ``},
		{`{"jsonrpc":"2.0","id":1,"result":{"_meta":{}},"params":{"_meta":{}}}`, ``, ``},
	} {
		m, err := Parse([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := string(m.Bytes(m.Params)); got != tc.params {
			t.Errorf("%s: Params %q, want %q", tc.in, got, tc.params)
		}
		if got := string(m.Bytes(m.Meta)); got != tc.meta {
			t.Errorf("%s: Meta %q, want %q", tc.in, got, tc.meta)
		}
	}
}
