package testkit

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The fake's tasks (protocol 2025-11-25), with FakeOptions.Tasks: it
// declares the tasks capability (list, cancel, task-augmented tools/call)
// and keeps one table of tasks for the whole process, as a real server
// does, so that a gateway sharing it between sessions must keep them
// apart. A task-augmented call of "echo" completes at once (its
// notifications/tasks/status "completed" follows the CreateTaskResult, and
// a progress notification with the request's token, if it had one, comes
// between them); "sample" asks the client for sampling first, naming the
// task in _meta; any other tool's task stays "working" until tasks/cancel.

// fakeTask is one task of the fake.
type fakeTask struct {
	ID      string
	Status  string
	Created string
	Result  any           // the tool's result once completed
	done    chan struct{} // closed on a terminal status
}

func (t *fakeTask) wire(updated string) map[string]any {
	return map[string]any{"taskId": t.ID, "status": t.Status, "createdAt": t.Created, "lastUpdatedAt": updated, "ttl": nil, "pollInterval": 100}
}

// taskTable is the fake's tasks, by id.
type taskTable struct {
	mu    sync.Mutex
	next  int
	tasks map[string]*fakeTask
	order []string
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// handleTasks serves a tasks request or a task-augmented tools/call;
// false if m is neither (or Tasks is off).
func (s *server) handleTasks(m message, done <-chan struct{}) bool {
	if !s.opts.Tasks {
		return false
	}
	switch m.Method {
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Task      json.RawMessage `json:"task"`
			Meta      struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		if json.Unmarshal(m.Params, &p) != nil || len(p.Task) == 0 || string(p.Task) == "null" {
			return false
		}
		var a toolArgs
		_ = json.Unmarshal(p.Arguments, &a)
		s.createTask(m, p.Name, a, p.Meta.ProgressToken)
	case "tasks/get", "tasks/result", "tasks/cancel":
		var p struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		t := s.taskByID(p.TaskID)
		if t == nil {
			s.replyError(m.ID, codeInvalidParams, "Failed to retrieve task: Task not found")
			return true
		}
		switch m.Method {
		case "tasks/get":
			s.tasks.mu.Lock()
			w := t.wire(now())
			s.tasks.mu.Unlock()
			s.reply(m.ID, w)
		case "tasks/result":
			select {
			case <-t.done:
			case <-done:
				return true
			}
			s.tasks.mu.Lock()
			res, status := t.Result, t.Status
			s.tasks.mu.Unlock()
			if status != "completed" {
				s.replyError(m.ID, codeInvalidParams, "task "+status)
				return true
			}
			r := res.(map[string]any)
			r["_meta"] = map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": t.ID}}
			s.reply(m.ID, r)
		case "tasks/cancel":
			s.tasks.mu.Lock()
			if t.Status != "working" {
				s.tasks.mu.Unlock()
				s.replyError(m.ID, codeInvalidParams, "task is already "+t.Status)
				return true
			}
			t.Status = "cancelled"
			close(t.done)
			w := t.wire(now())
			s.tasks.mu.Unlock()
			s.reply(m.ID, w)
		}
	case "tasks/list":
		s.tasks.mu.Lock()
		list := make([]any, 0, len(s.tasks.order))
		for _, id := range s.tasks.order {
			list = append(list, s.tasks.tasks[id].wire(now()))
		}
		s.tasks.mu.Unlock()
		s.reply(m.ID, map[string]any{"tasks": list})
	default:
		return false
	}
	return true
}

// createTask answers a task-augmented call with its CreateTaskResult.
func (s *server) createTask(m message, tool string, a toolArgs, token json.RawMessage) {
	s.tasks.mu.Lock()
	if s.tasks.tasks == nil {
		s.tasks.tasks = map[string]*fakeTask{}
	}
	s.tasks.next++
	t := &fakeTask{ID: fmt.Sprintf("task-%d", s.tasks.next), Status: "working", Created: now(), done: make(chan struct{})}
	s.tasks.tasks[t.ID] = t
	s.tasks.order = append(s.tasks.order, t.ID)
	created := t.wire(t.Created)
	s.tasks.mu.Unlock()
	s.reply(m.ID, map[string]any{"task": created})
	if len(token) > 0 && string(token) != "null" {
		// The request's token stays valid for the task's lifetime.
		s.notify("notifications/progress", map[string]any{"progressToken": token, "progress": 1, "total": 1})
	}
	text := strings.TrimSpace(a.Message)
	switch tool {
	case "echo":
	case "sample":
		// The task needs the client's input: its sampling request names
		// the task, and comes when no request of the client is in flight.
		res, err := s.call("sampling/createMessage", map[string]any{
			"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": a.Prompt}}},
			"maxTokens": 100,
			"_meta":     map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": t.ID}},
		}, nil)
		if err != nil {
			text = "sampling failed: " + err.Error()
		} else {
			text = string(res)
		}
	default:
		return
	}
	s.tasks.mu.Lock()
	t.Status, t.Result = "completed", textResult(text, false)
	close(t.done)
	status := t.wire(now())
	s.tasks.mu.Unlock()
	s.notify("notifications/tasks/status", status)
}

func (s *server) taskByID(id string) *fakeTask {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	return s.tasks.tasks[id]
}
