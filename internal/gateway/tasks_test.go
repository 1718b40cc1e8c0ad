package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// taskReply is what a task method answers.
type taskReply struct {
	Task   *struct{ TaskID, Status string } `json:"task"`
	TaskID string                           `json:"taskId"`
	Status string                           `json:"status"`
	Tasks  []struct{ TaskID string }        `json:"tasks"`
}

func taskResult(t *testing.T, r *reply) (taskReply, rpc) {
	t.Helper()
	m := r.final(t)
	var tr taskReply
	if m.Error == nil {
		if err := json.Unmarshal(m.Result, &tr); err != nil {
			t.Fatalf("result %s: %v", m.Result, err)
		}
	}
	return tr, m
}

// Two sessions on one shared process of a server with tasks (2025-11-25):
// the task ids are the process's, yet a session reads, lists and cancels
// only the tasks it created; another's is unknown to it (-32602, as the
// spec answers an unknown task), and a task's status notification and
// later progress go to its creator alone. Before, the gateway hid the capability but passed
// every tasks/* request on: B read and cancelled A's tasks.
func TestTasksBelongToTheirSession(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("tasks", testkit.FakeOptions{Tasks: true})))
	a, b := g.client("tasks"), g.client("tasks")
	for _, c := range []*mcpClient{a, b} {
		r := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
		if m := r.final(t); m.Error != nil || !strings.Contains(string(m.Result), `"tasks":{`) {
			t.Errorf("initialize: %s %+v: want the server's tasks capability", m.Result, m.Error)
		}
		c.session = r.Header.Get("Mcp-Session-Id")
		c.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	aEvents, closeA := openGET(t, a)
	defer closeA()
	bEvents, closeB := openGET(t, b)
	defer closeB()

	// A creates a task that completes at once; its progress (after the
	// CreateTaskResult, with A's token) and its status come to A.
	tr, m := taskResult(t, a.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"for A"},"task":{"ttl":60000},"_meta":{"progressToken":"pA"}}}`))
	if m.Error != nil || tr.Task == nil || tr.Task.TaskID == "" {
		t.Fatalf("task-augmented call: %s %+v", m.Result, m.Error)
	}
	done := tr.Task.TaskID
	if n := next(t, aEvents); n.Method != "notifications/progress" || !strings.Contains(string(n.Params), `"progressToken":"pA"`) {
		t.Fatalf("A's stream: %s %s, want its task's progress with its token", n.Method, n.Params)
	}
	if n := next(t, aEvents); n.Method != "notifications/tasks/status" || !strings.Contains(string(n.Params), `"taskId":"`+done+`"`) {
		t.Fatalf("A's stream: %s %s, want its task's status", n.Method, n.Params)
	}
	// A second task stays working.
	tr, m = taskResult(t, a.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"task":{}}}`))
	if m.Error != nil || tr.Task == nil || tr.Task.Status != "working" {
		t.Fatalf("second task: %s %+v", m.Result, m.Error)
	}
	working := tr.Task.TaskID

	// B knows neither.
	for _, req := range []struct{ method, id string }{
		{"tasks/get", done}, {"tasks/result", done}, {"tasks/cancel", working}, {"tasks/get", working},
	} {
		_, m := taskResult(t, b.post(t, `{"jsonrpc":"2.0","id":3,"method":"`+req.method+`","params":{"taskId":"`+req.id+`"}}`))
		if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "Task not found") {
			t.Errorf("B's %s of A's task %s: %s %+v, want -32602 task not found", req.method, req.id, m.Result, m.Error)
		}
	}
	if tr, m := taskResult(t, b.post(t, `{"jsonrpc":"2.0","id":4,"method":"tasks/list"}`)); m.Error != nil || len(tr.Tasks) != 0 {
		t.Errorf("B's tasks/list: %s %+v, want none of A's", m.Result, m.Error)
	}
	// B's task is B's.
	tr, m = taskResult(t, b.post(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"for B"},"task":{}}}`))
	if m.Error != nil || tr.Task == nil {
		t.Fatalf("B's task: %s %+v", m.Result, m.Error)
	}
	bTask := tr.Task.TaskID
	// B's stream's first message is its own task's status: A's never came
	// to it.
	if n := next(t, bEvents); n.Method != "notifications/tasks/status" || !strings.Contains(string(n.Params), `"taskId":"`+bTask+`"`) {
		t.Fatalf("B's stream: %s %s, want only its own task's status", n.Method, n.Params)
	}

	// A still reads, lists and cancels its own, and nothing of B's.
	if tr, m := taskResult(t, a.post(t, `{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"`+done+`"}}`)); m.Error != nil || tr.Status != "completed" {
		t.Errorf("A's tasks/get: %s %+v", m.Result, m.Error)
	}
	if r := a.post(t, `{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"`+done+`"}}`); r.Status != http.StatusOK || !strings.Contains(string(r.final(t).Result), "for A") {
		t.Errorf("A's tasks/result: %s", r.final(t).Result)
	}
	tr, m = taskResult(t, a.post(t, `{"jsonrpc":"2.0","id":8,"method":"tasks/list"}`))
	var ids []string
	for _, task := range tr.Tasks {
		ids = append(ids, task.TaskID)
	}
	if m.Error != nil || strings.Join(ids, ",") != done+","+working {
		t.Errorf("A's tasks/list: %v %+v, want %s,%s", ids, m.Error, done, working)
	}
	if tr, m := taskResult(t, a.post(t, `{"jsonrpc":"2.0","id":9,"method":"tasks/cancel","params":{"taskId":"`+working+`"}}`)); m.Error != nil || tr.Status != "cancelled" {
		t.Errorf("A's tasks/cancel: %s %+v", m.Result, m.Error)
	}
	if _, m := taskResult(t, a.post(t, `{"jsonrpc":"2.0","id":10,"method":"tasks/get","params":{"taskId":"`+bTask+`"}}`)); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("A's tasks/get of B's task: %s %+v, want unknown", m.Result, m.Error)
	}
}

// A task that needs the client's input asks its creator, and no one else:
// the server's sampling request names the task (related-task _meta) and
// comes while another session, B, is the only one with a request in
// flight, which shared mode's rule would pick. It reaches A's stream; A's
// answer completes the task. Before, B was asked for A's task.
func TestTaskInputGoesToItsCreator(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("tasks", testkit.FakeOptions{Tasks: true})))
	a, b := g.client("tasks"), g.client("tasks")
	a.connect(t) // both declare sampling
	b.connect(t)
	aEvents, closeA := openGET(t, a)
	defer closeA()

	// B's call stays in flight until the test ends: then B leaves, and
	// the gateway cancels it upstream.
	ctx, leave := context.WithCancel(context.Background())
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		resp, err := g.http.Do(b.request(http.MethodPost, callBody("1", "slow", map[string]any{"ms": 600000}, "")).WithContext(ctx))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	defer func() { leave(); <-bDone }()
	testkit.WaitFor(t, "B's call in flight", func() bool { return g.pending("tasks") == 1 })

	tr, m := taskResult(t, a.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"for A"},"task":{}}}`))
	if m.Error != nil || tr.Task == nil {
		t.Fatalf("task-augmented call: %s %+v", m.Result, m.Error)
	}
	ask := next(t, aEvents)
	if ask.Method != "sampling/createMessage" || !strings.Contains(string(ask.Params), "for A") {
		t.Fatalf("A's stream: %s %s, want the task's sampling request", ask.Method, ask.Params)
	}
	answer := `{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"sampled for A"},"model":"m"}}`
	if r := a.post(t, answer); r.Status != http.StatusAccepted {
		t.Fatalf("A's answer: status %d", r.Status)
	}
	if n := next(t, aEvents); n.Method != "notifications/tasks/status" || !strings.Contains(string(n.Params), `"completed"`) {
		t.Fatalf("A's stream: %s %s, want the task completed", n.Method, n.Params)
	}
	r := a.post(t, `{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"`+tr.Task.TaskID+`"}}`)
	if res := string(r.final(t).Result); !strings.Contains(res, "sampled for A") {
		t.Errorf("tasks/result: %s", res)
	}
}
