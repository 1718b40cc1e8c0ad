package mux

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Tasks (protocol 2025-11-25) on a shared process. A task-augmented
// request (params.task) is answered with a task id the server made up,
// unique within the process but shared by every session on it: left
// alone, any session could read (tasks/get, tasks/result), list or cancel
// another's task. So a shared Mux remembers which client created each
// task, from the CreateTaskResult it relays (before the client sees the
// id), and:
//
//   - tasks/get, tasks/result and tasks/cancel of a task the client did
//     not create are answered here as the spec answers an unknown task
//     (-32602, "Failed to retrieve task: Task not found"), never forwarded;
//   - a tasks/list reply keeps only the client's own tasks (a page may come
//     back shorter, or empty with a nextCursor: cursors stay the server's);
//   - progress of a task-augmented request after its CreateTaskResult (its
//     token stays valid for the task's lifetime) goes to the creator's
//     standalone stream, with the creator's token;
//   - notifications/tasks/status goes only to the creator's standalone
//     stream, and is dropped (counted) for a task of no known client;
//   - a server request naming a task in _meta (io.modelcontextprotocol/
//     related-task: a task that needs input) goes to the task's creator,
//     whether or not it has a request in flight (on its latest request's
//     stream, else its standalone one), and to no other session: refused
//     when the creator is gone or did not declare the capability.
//
// A session belongs to one principal (the HTTP front checks it on every
// request), so a task belongs to that principal too. A client remembers
// at most maxTasksPerClient tasks: beyond, its oldest is forgotten
// (Stats.TasksForgotten) and becomes unknown to it; a closed client's
// tasks are forgotten with it. An exclusive Mux (one client) needs none
// of this and does none.

// maxTasksPerClient bounds the tasks a client is remembered to own.
const maxTasksPerClient = 1024

// errTaskNotFound is the message of the spec's "unknown task" error.
const errTaskNotFound = "Failed to retrieve task: Task not found"

// task is what a shared Mux knows of a task.
type task struct {
	owner   *Client // the client whose request created it
	upToken uint64  // that request's progress token upstream (its upstream id); 0: it had none
	token   []byte  // the client's own progress token
}

// ownerLocked returns the client that created task id, or nil. Called with
// m.mu held.
func (m *Mux) ownerLocked(id string) *Client {
	if t := m.tasks[id]; t != nil {
		return t.owner
	}
	return nil
}

// dropTaskLocked forgets task id. Called with m.mu held.
func (m *Mux) dropTaskLocked(id string) {
	if t := m.tasks[id]; t != nil && t.upToken != 0 && m.taskTokens[t.upToken] == id {
		delete(m.taskTokens, t.upToken)
	}
	delete(m.tasks, id)
}

// taskAugmented reports whether a client request asks for a task
// (params.task present and not null). Parse located params.task: nothing
// scans the message again, which for a 1 MiB argument cost a pass over
// every byte of every call.
func taskAugmented(msg *jsonrpc.Message) bool {
	return msg.Task.Present() && string(msg.Bytes(msg.Task)) != "null"
}

// taskIDOf returns the string params.taskId of a message (tasks/get,
// tasks/result, tasks/cancel, notifications/tasks/status), or "" and false.
// It reads a client's request as strictly as taskid.go says.
func taskIDOf(raw []byte) (string, bool) {
	id, err := strictTaskID(raw)
	return id, err == nil
}

// taskRequest serves tasks/get, tasks/result and tasks/cancel of a shared
// Mux: forwarded only for a task the client created.
func (c *Client) taskRequest(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	id := msg.Bytes(msg.ID)
	taskID, err := strictTaskID(msg.Raw)
	if err != nil {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, "Invalid params: "+err.Error()))
		return
	}
	m := c.m
	m.mu.Lock()
	owned := m.ownerLocked(taskID) == c
	m.mu.Unlock()
	if !owned {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, errTaskNotFound))
		return
	}
	c.forward(ctx, msg, out, nil)
}

// createTask forwards a task-augmented request, recording the task its
// CreateTaskResult names as the client's, with the request's progress
// token.
func (c *Client) createTask(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	var token []byte
	if msg.ProgressToken.Present() {
		token = bytes.Clone(msg.Bytes(msg.ProgressToken))
	}
	c.forward(ctx, msg, out, func(reply *jsonrpc.Message) {
		if reply.IsError {
			return
		}
		var r struct {
			Task struct {
				TaskID *string `json:"taskId"`
			} `json:"task"`
		}
		if json.Unmarshal(resultOf(reply.Raw), &r) != nil || r.Task.TaskID == nil {
			return // answered at once, without a task: nothing to own
		}
		var upToken uint64
		if token != nil {
			upToken, _ = parseUint(reply.Bytes(reply.ID)) // the request's upstream id was its token
		}
		c.m.ownTask(c, *r.Task.TaskID, upToken, token)
	})
}

// ownTask records that c created task id with a request whose progress
// token was upToken upstream and token for c (0 and nil: none).
func (m *Mux) ownTask(c *Client, id string, upToken uint64, token []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.closed {
		return // its session is gone: nobody may read the task
	}
	if m.tasks == nil {
		m.tasks, m.taskTokens = map[string]*task{}, map[uint64]string{}
	}
	if prev := m.ownerLocked(id); prev != nil && prev != c {
		// A server reusing a live id: the newest creator has it.
		prev.tasks = deleteTask(prev.tasks, id)
	}
	m.dropTaskLocked(id)
	m.tasks[id] = &task{owner: c, upToken: upToken, token: token}
	if upToken != 0 {
		m.taskTokens[upToken] = id
	}
	c.tasks = append(deleteTask(c.tasks, id), id)
	if len(c.tasks) > maxTasksPerClient {
		old := c.tasks[0]
		c.tasks = c.tasks[1:]
		if m.ownerLocked(old) == c {
			m.dropTaskLocked(old)
		}
		m.stats.tasksForgotten.Add(1)
	}
}

// forgetTasksLocked drops what c owns (it closed). Called with m.mu held.
func (m *Mux) forgetTasksLocked(c *Client) {
	for _, id := range c.tasks {
		if m.ownerLocked(id) == c {
			m.dropTaskLocked(id)
		}
	}
	c.tasks = nil
}

func deleteTask(ids []string, id string) []string {
	for i, v := range ids {
		if v == id {
			return append(ids[:i], ids[i+1:]...)
		}
	}
	return ids
}

// taskStatus delivers notifications/tasks/status to the client that
// created the task, or drops it.
func (m *Mux) taskStatus(msg *jsonrpc.Message) {
	id, ok := taskIDOf(msg.Raw)
	var owner *Client
	if ok {
		m.mu.Lock()
		owner = m.ownerLocked(id)
		m.mu.Unlock()
	}
	if owner == nil {
		m.stats.droppedNotes.Add(1)
		m.log.Debug("task status dropped: no session created the task", "method", msg.MethodName())
		return
	}
	owner.general.Send(bytes.Clone(msg.Raw))
}

// taskListStream is the Stream of a shared Mux's tasks/list: its reply
// keeps the client's own tasks only.
type taskListStream struct {
	conn.Stream
	c *Client
}

func (s taskListStream) Reply(msg []byte) {
	if msg != nil {
		msg = s.c.m.filterTaskList(s.c, msg)
	}
	s.Stream.Reply(msg)
}

// filterTaskList returns a tasks/list reply (the client's id in it) with
// only the tasks c owns. The id is copied as it is; the result is
// re-encoded with each kept task as the server wrote it. A reply that is
// not a list result is returned unchanged.
func (m *Mux) filterTaskList(c *Client, reply []byte) []byte {
	msg, err := jsonrpc.Parse(reply)
	if err != nil || msg.IsError {
		return reply
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(resultOf(reply), &result) != nil || result == nil {
		return reply
	}
	var tasks []json.RawMessage
	if json.Unmarshal(result["tasks"], &tasks) != nil {
		return reply
	}
	kept := make([]json.RawMessage, 0, len(tasks))
	m.mu.Lock()
	for _, t := range tasks {
		if id, ok := taskIDOfTask(t); ok && m.ownerLocked(id) == c {
			kept = append(kept, t)
		}
	}
	m.mu.Unlock()
	result["tasks"], _ = json.Marshal(kept)
	body, err := json.Marshal(result)
	if err != nil {
		return reply
	}
	return jsonrpc.Response(msg.Bytes(msg.ID), body)
}

// taskIDOfTask returns a Task object's taskId.
func taskIDOfTask(t json.RawMessage) (string, bool) {
	var v struct {
		TaskID *string `json:"taskId"`
	}
	if json.Unmarshal(t, &v) != nil || v.TaskID == nil {
		return "", false
	}
	return *v.TaskID, true
}

// taskAttributeLocked attributes a server request that names a task
// (params._meta[protocol.MetaRelatedTask].taskId): related is true when it does, and
// then c is the task's creator if it may take the request (nil: refuse),
// out its stream. Called with m.mu held.
func (m *Mux) taskAttributeLocked(msg *jsonrpc.Message, need capability) (c *Client, out conn.Stream, related bool) {
	if m.mode == modeExclusive || !bytes.Contains(msg.Raw, []byte(protocol.MetaRelatedTask)) {
		return nil, nil, false
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(paramsOf(msg.Raw), &p) != nil || p.Meta[protocol.MetaRelatedTask] == nil {
		return nil, nil, false
	}
	id, ok := taskIDOfTask(p.Meta[protocol.MetaRelatedTask])
	if !ok {
		return nil, nil, false
	}
	owner := m.ownerLocked(id)
	if owner == nil || owner.caps&need != need {
		return nil, nil, true
	}
	if l := owner.latest; l != nil && l.out != nil && !l.queued {
		return owner, l.out, true
	}
	return owner, owner.general, true
}

// taskProgressLocked returns where progress with upstream token up goes
// when no request in flight has it: the standalone stream of the client
// whose task-augmented request had it, with that client's token; nil when
// none. Called with m.mu held.
func (m *Mux) taskProgressLocked(up uint64, msg *jsonrpc.Message) (conn.Stream, []byte) {
	t := m.tasks[m.taskTokens[up]]
	if t == nil || t.token == nil || t.owner.closed {
		return nil, nil
	}
	return t.owner.general, jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.ProgressToken, Value: t.token})
}
