package front

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
)

func parseAll(t *testing.T, raw ...string) []jsonrpc.Message {
	t.Helper()
	msgs := make([]jsonrpc.Message, len(raw))
	for i, r := range raw {
		var err error
		if msgs[i], err = jsonrpc.Parse([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

// A batch whose first request was cancelled (a final with no message) and
// whose second got nothing before its session ended: the second is answered
// (counting finals used to spend the one missing answer on the cancelled
// request, leaving the other in silence).
func TestMissingAfterCancelledRequestInBatch(t *testing.T) {
	msgs := parseAll(t, `{"jsonrpc":"2.0","id":1,"method":"a"}`, `{"jsonrpc":"2.0","method":"n"}`, `{"jsonrpc":"2.0","id":2,"method":"b"}`)
	a := answers{msgs: msgs, reqs: 2}
	a.saw(session.Event{Final: true}) // request 1, cancelled
	var ids []string
	for _, e := range a.missing("deleted") {
		m, err := jsonrpc.Parse(e)
		if err != nil || !strings.Contains(string(e), "deleted") {
			t.Fatalf("%s %v", e, err)
		}
		ids = append(ids, string(m.Bytes(m.ID)))
	}
	if !strings.Contains(strings.Join(ids, ","), "2") {
		t.Fatalf("answered ids %v: request 2 got nothing", ids)
	}
}

// Every request answered: nothing missing; one request unanswered: one error.
func TestMissingCounts(t *testing.T) {
	one := parseAll(t, `{"jsonrpc":"2.0","id":"x","method":"a"}`)
	a := answers{msgs: one, reqs: 1}
	if got := a.missing("r"); len(got) != 1 || !strings.Contains(string(got[0]), `"id":"x"`) {
		t.Fatalf("%q", got)
	}
	a.saw(session.Event{Final: true, Data: []byte(`{"jsonrpc":"2.0","id":"x","result":{}}`)})
	if got := a.missing("r"); got != nil {
		t.Fatalf("%q", got)
	}
	two := parseAll(t, `{"jsonrpc":"2.0","id":1,"method":"a"}`, `{"jsonrpc":"2.0","id":2,"method":"b"}`)
	b := answers{msgs: two, reqs: 2}
	b.saw(session.Event{Final: true, Data: []byte(`{"jsonrpc":"2.0","id":2,"result":{}}`)})
	if got := b.missing("r"); len(got) != 1 || !strings.Contains(string(got[0]), `"id":1`) {
		t.Fatalf("%q", got)
	}
	var nilAns *answers
	if nilAns.missing("r") != nil {
		t.Fatal("a nil answers reported missing replies")
	}
}
