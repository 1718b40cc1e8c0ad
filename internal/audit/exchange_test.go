package audit

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// records is an Observer that keeps what it is told (one goroutine).
type records []Record

func (r *records) Request(rec Record) { *r = append(*r, rec) }

// exchangeOutcomes answers a POST of reqs with body, written in the
// pieces given by cuts (offsets into body), on an Exchange of an
// Auditor that only observes, and returns the outcome and code of each
// request's record.
func exchangeOutcomes(t *testing.T, contentType string, reqs []string, body []byte, cuts []int) []string {
	t.Helper()
	var got records
	a := Observe(nil, &got, nil)
	r := httptest.NewRequest(http.MethodPost, "/servers/s/mcp", strings.NewReader(""))
	x := a.Begin(httptest.NewRecorder(), r, Target{Kind: "server", Name: "s"})
	msgs := make([]jsonrpc.Message, len(reqs))
	for i, q := range reqs {
		m, err := jsonrpc.Parse([]byte(q))
		if err != nil {
			t.Fatal(err)
		}
		msgs[i] = m
	}
	x.SetMessages(msgs)
	x.Header().Set("Content-Type", contentType)
	x.WriteHeader(http.StatusOK)
	from := 0
	for _, c := range append(cuts, len(body)) {
		if _, err := x.Write(body[from:c]); err != nil {
			t.Fatal(err)
		}
		from = c
	}
	x.Finish()
	out := make([]string, len(got))
	for i, rec := range got {
		out[i] = rec.Outcome
		if rec.Code != 0 {
			out[i] += " " + strconv.Itoa(rec.Code)
		}
	}
	return out
}

// TestExchangeOutcomesWholeOrInPieces: the replies of a JSON body read as
// it is written (whole in its first Write: nothing kept) give the outcomes
// the same body gives written in pieces (kept and read at Finish), for a
// result, an error, a batch, a body that is no JSON-RPC response, one that
// goes on past a whole value (not JSON), and one longer than what is kept.
func TestExchangeOutcomesWholeOrInPieces(t *testing.T) {
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"x"}}`
	}
	big := `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"` + strings.Repeat("x", auditCapture) + `"}}`
	for _, tt := range []struct {
		name string
		reqs []string
		body string
		want string
	}{
		{"result", []string{call("1")}, `{"jsonrpc":"2.0","id":1,"result":{}}`, "ok"},
		{"error", []string{call(`"a"`)}, `{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"no"}}` + "\n", "error -32602"},
		{"another id's error", []string{call("1")}, `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"no"}}`, "ok"},
		{"batch", []string{call("1"), call("2")},
			`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}]`, "ok,error -32601"},
		{"no JSON-RPC", []string{call("1")}, `{"hello":"world"}`, "ok"},
		{"more after a whole reply", []string{call("1")}, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}{"x":1}`, "ok"},
		{"longer than kept", []string{call("1")}, big, "ok"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			whole := strings.Join(exchangeOutcomes(t, "application/json", tt.reqs, body, nil), ",")
			if whole != tt.want {
				t.Errorf("written whole: outcomes %q, want %q", whole, tt.want)
			}
			for _, cut := range []int{1, len(body) / 2, len(body) - 1} {
				got := strings.Join(exchangeOutcomes(t, "application/json", tt.reqs, body, []int{cut}), ",")
				if got != tt.want {
					t.Errorf("written in two at %d: outcomes %q, want %q", cut, got, tt.want)
				}
			}
		})
	}
}

// TestExchangeOutcomesStream: an SSE body is kept and its data lines read
// at Finish, however it is written.
func TestExchangeOutcomesStream(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}`
	body := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32603,\"message\":\"x\"}}\n\n")
	for _, cuts := range [][]int{nil, {10}, {bytes.Index(body, []byte("\n\n")) + 2}} {
		if got := strings.Join(exchangeOutcomes(t, "text/event-stream", []string{call}, body, cuts), ","); got != "error -32603" {
			t.Errorf("cuts %v: outcomes %q, want %q", cuts, got, "error -32603")
		}
	}
}

// TestExchangeOutcomesAfterBigEvent: the final reply of a stream that
// carried a 1 MiB event before it is still found in what is kept, whether
// the big event came in one Write (its end alone is kept, not a copy of
// all of it) or in pieces.
func TestExchangeOutcomesAfterBigEvent(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}`
	first := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"
	big := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"" + strings.Repeat("b", 1<<20) + "\"}}\n\n"
	final := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32603,\"message\":\"x\"}}\n\n"
	body := []byte(first + big + final)
	for _, cuts := range [][]int{
		{len(first), len(first) + len(big)}, // the big event in one Write
		{len(first) + 100, len(first) + len(big)/2},
		{len(first) + len(big) + 5},
	} {
		if got := strings.Join(exchangeOutcomes(t, "text/event-stream", []string{call}, body, cuts), ","); got != "error -32603" {
			t.Errorf("cuts %v: outcomes %q, want %q", cuts, got, "error -32603")
		}
	}
}

// TestExchangeObservedNoAllocs: observing (no audit log) a POST answered
// with one JSON body costs the Exchange and the record nothing beyond the
// Exchange itself: the body is not copied, the reply's short id goes in
// the Exchange, the line stays on the stack.
func TestExchangeObservedNoAllocs(t *testing.T) {
	var got records
	a := Observe(nil, &got, nil)
	r := httptest.NewRequest(http.MethodPost, "/servers/s/mcp", strings.NewReader(""))
	m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"c-17","method":"tools/call","params":{"name":"echo"}}`))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []jsonrpc.Message{m}
	body := []byte(`{"jsonrpc":"2.0","id":"c-17","result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 900) + `"}]}}`)
	w := httptest.NewRecorder()
	w.Header().Set("Content-Type", "application/json")
	target := Target{Kind: "server", Name: "s"}
	got = make(records, 0, 1000)
	n := testing.AllocsPerRun(200, func() {
		w.Body.Reset()
		x := a.Begin(w, r, target)
		x.SetMessages(msgs)
		_, _ = x.Write(body)
		x.Finish()
	})
	if n > 1 {
		t.Fatalf("%.1f allocations per observed POST, want at most 1 (the Exchange)", n)
	}
	if len(got) == 0 || got[len(got)-1].Outcome != OutcomeOK || got[len(got)-1].BytesOut != int64(len(body)) {
		t.Fatalf("records %+v", got[len(got)-1:])
	}
}
