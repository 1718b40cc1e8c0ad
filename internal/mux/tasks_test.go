package mux

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// A client owns at most maxTasksPerClient tasks: creating one more forgets
// its oldest (counted), which it then gets as unknown; a closed client's
// tasks are forgotten, and its status notifications dropped.
func TestTasksBoundedAndForgotten(t *testing.T) {
	m, _ := startShared(t, Options{})
	a, b := m.Join(newRec()), m.Join(newRec())
	for i := range maxTasksPerClient + 1 {
		m.ownTask(a, fmt.Sprintf("t%d", i), 0, nil)
	}
	m.ownTask(b, "b0", 0, nil)
	if got := m.Stats().TasksForgotten; got != 1 {
		t.Errorf("TasksForgotten %d, want 1", got)
	}
	out := newRec()
	a.Handle(context.Background(), request(t, "1", "tasks/get", `{"taskId":"t0"}`), out)
	if code, text, isErr := errorCode(t, out.waitReplies(t, 1)[0]); !isErr || code != -32602 || text != errTaskNotFound {
		t.Errorf("the forgotten task: %d %q", code, text)
	}
	m.mu.Lock()
	owner := m.ownerLocked("t1")
	m.mu.Unlock()
	if owner != a {
		t.Errorf("t1 not a's")
	}

	a.Close()
	m.mu.Lock()
	left := len(m.tasks)
	m.mu.Unlock()
	if left != 1 {
		t.Errorf("%d tasks remembered after a closed, want b's one", left)
	}
	dropped := m.Stats().DroppedNotifications
	m.Line(1, []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t1","status":"completed"}}`))
	if m.Stats().DroppedNotifications != dropped+1 {
		t.Errorf("a closed client's task status not dropped")
	}
}

// A tasks/list reply keeps the client's tasks only, as the server wrote
// them, with the client's id byte for byte.
func TestFilterTaskList(t *testing.T) {
	m, _ := startShared(t, Options{})
	a, b := m.Join(newRec()), m.Join(newRec())
	m.ownTask(a, "x", 0, nil)
	m.ownTask(b, "y", 0, nil)
	reply := []byte(`{"jsonrpc":"2.0","id":123456789012345678901,"result":{"tasks":[{"taskId":"x","status":"working"},{"taskId":"y","status":"working"},{"status":"odd"}],"nextCursor":"c2"}}`)
	got := string(m.filterTaskList(a, reply))
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":123456789012345678901,`) || !strings.Contains(got, `"tasks":[{"taskId":"x","status":"working"}]`) ||
		!strings.Contains(got, `"nextCursor":"c2"`) || strings.Contains(got, `"y"`) {
		t.Errorf("filtered: %s", got)
	}
	errReply := `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`
	if got := string(m.filterTaskList(a, []byte(errReply))); got != errReply {
		t.Errorf("an error reply changed: %s", got)
	}
}

// FuzzFilterTaskList: any reply from a server comes back unchanged or as
// valid JSON with its id as it was, never a panic.
func FuzzFilterTaskList(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","result":{"tasks":[{"taskId":"x"},{"taskId":7}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tasks":null}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":[]}`))
	m := New(Options{Name: "f"})
	defer m.Close()
	c := m.Join(newRec())
	m.ownTask(c, "x", 0, nil)
	f.Fuzz(func(t *testing.T, reply []byte) {
		out := m.filterTaskList(c, reply)
		if string(out) == string(reply) {
			return
		}
		in, err := jsonrpc.Parse(reply)
		if err != nil {
			t.Fatalf("rewrote a reply that does not parse: %q", reply)
		}
		got, err := jsonrpc.Parse(out)
		if err != nil || string(got.Bytes(got.ID)) != string(in.Bytes(in.ID)) {
			t.Fatalf("%q -> %q (%v)", reply, out, err)
		}
	})
}
