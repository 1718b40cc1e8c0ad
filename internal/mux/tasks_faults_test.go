package mux

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Attacks on the task table of a shared process: a session names its own
// task to the gateway and another's to the server. Each request here is
// b's, b owning "b1" and a owning "a1": the ones spelled so that a server
// reading the exact member name would read "a1" must never reach the
// server (on the old code, read with encoding/json, they were forwarded);
// b's own task, however escaped, still is.
func TestTaskRequestReadAsTheServerReadsIt(t *testing.T) {
	m, up := startShared(t, Options{})
	a, b := m.Join(newRec()), m.Join(newRec())
	m.ownTask(a, "a1", 0, nil)
	m.ownTask(b, "b1", 0, nil)

	refused := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a1","TaskId":"b1"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"a1","taskid":"b1"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"taskId":"a1","TASKID":"b1"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"a1"},"Params":{"taskId":"b1"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"a1","taskId":"b1"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"b1","taskId":"a1"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":" b1"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":"\u0061\u0031"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":7}}`,
		`{"jsonrpc":"2.0","id":10,"method":"tasks/get","params":{"taskId":"a1"}}`,
	}
	for _, raw := range refused {
		msg, err := jsonrpc.Parse([]byte(raw))
		if err != nil {
			continue // the front would refuse it before the mux
		}
		out := newRec()
		b.Handle(context.Background(), &msg, out)
		// Refused at once, by the gateway: nothing to wait for.
		replies := out.repliesNow()
		if len(replies) != 1 {
			t.Errorf("%s: forwarded, not refused", raw)
			continue
		}
		if code, _, isErr := errorCode(t, replies[0]); !isErr || code != protocol.CodeInvalidParams {
			t.Errorf("%s: answered %s, want -32602", raw, replies[0])
		}
	}
	up.mu.Lock()
	leaked := len(up.writtenLocked("tasks/get")) + len(up.writtenLocked("tasks/result")) + len(up.writtenLocked("tasks/cancel"))
	up.mu.Unlock()
	if leaked != 0 {
		t.Errorf("%d requests naming a's task reached the server", leaked)
	}

	// b's own task, its id escaped, is b's.
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"t\u0061skId":"\u0062\u0031"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b.Handle(context.Background(), &msg, newRec())
	up.waitFor(t, "b's own tasks/get upstream", func() bool { return len(up.writtenLocked("tasks/get")) == 1 })
}

// FuzzStrictTaskID: any request is read without a panic, and an id read
// is the one a server reading members by their exact names (into maps, as
// JavaScript and Python do) gets from the same bytes, and the one the
// loose reading of encoding/json gets too.
func FuzzStrictTaskID(f *testing.F) {
	f.Add([]byte(`{"params":{"taskId":"x"}}`))
	f.Add([]byte(`{"params":{"taskId":"x","TaskId":"y"}}`))
	f.Add([]byte(`{"params":{"taskId":"\u0078"},"Params":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		id, err := strictTaskID(raw)
		if err != nil {
			return
		}
		var exact struct {
			Params map[string]any `json:"params"`
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(raw, &top) != nil || json.Unmarshal(top["params"], &exact.Params) != nil {
			t.Fatalf("%q: read as %q, but not JSON to encoding/json", raw, id)
		}
		if got, _ := exact.Params["taskId"].(string); got != id {
			t.Fatalf("%q: read as %q, a server reading exact names gets %q", raw, id, got)
		}
		var loose struct {
			Params struct {
				TaskID string `json:"taskId"`
			} `json:"params"`
		}
		if json.Unmarshal(raw, &loose) != nil || loose.Params.TaskID != id {
			t.Fatalf("%q: read as %q, encoding/json reads %q", raw, id, loose.Params.TaskID)
		}
	})
}
