package mux

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file is the upstream side: the handler methods the upstream's reader
// goroutine calls, and the routing of what the server sends.

// Started is called when process generation gen has started.
func (m *Mux) Started(gen uint64) {
	m.mu.Lock()
	m.gen, m.running, m.initErr = gen, true, nil
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.initializeUpstream(gen)
	}()
}

// Exited is called when process generation gen has exited: every request
// pending on it is answered with an error at once.
func (m *Mux) Exited(gen uint64, err error) {
	m.mu.Lock()
	if gen != m.gen {
		m.mu.Unlock()
		return
	}
	m.running = false
	if m.readyGen == gen {
		m.ready = make(chan struct{})
	}
	calls := m.takeAllLocked()
	m.mu.Unlock()
	if err != nil {
		m.log.Warn("upstream exited", "gen", gen, "err", err, "failed_requests", len(calls))
	}
	m.failCalls(calls, errExited)
}

// Oversized is called for a line over the line limit. If its prefix shows
// the id of a pending request, that request fails now instead of timing out.
func (m *Mux) Oversized(gen uint64, prefix []byte, size int) {
	m.stats.oversized.Add(1) // the upstream logged it
	i := bytes.Index(prefix, []byte(`"id":`))
	if i < 0 {
		return
	}
	rest := bytes.TrimLeft(prefix[i+5:], " ")
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if id, ok := parseUint(rest[:j]); ok {
		m.finish(id, func(c *call) {
			m.fail(c, jsonrpc.CodeInternalError, fmt.Sprintf("mcpgate: reply of %d bytes exceeds the line limit", size))
		})
	}
}

// Line routes one message read from the server.
func (m *Mux) Line(gen uint64, line []byte) {
	msg, err := jsonrpc.Parse(line)
	if err != nil {
		m.stats.garbage.Add(1)
		m.log.Warn("upstream wrote a line that is not JSON-RPC; skipped", "err", err, "bytes", len(line))
		return
	}
	switch msg.Kind {
	case jsonrpc.KindResponse:
		m.reply(&msg)
	case jsonrpc.KindRequest:
		m.serverRequest(gen, &msg)
	case jsonrpc.KindNotification:
		m.serverNotification(&msg)
	}
}

// reply delivers a response to the call it answers, with the client's id.
func (m *Mux) reply(msg *jsonrpc.Message) {
	id, ok := parseUint(msg.Bytes(msg.ID))
	var c *call
	var next []job
	if ok {
		c, next = m.take(id)
	}
	if c == nil {
		m.stats.unknown.Add(1)
		m.log.Info("upstream reply matches no pending request (late or unknown); dropped", "id", string(msg.Bytes(msg.ID)))
		return
	}
	if c.onReply != nil {
		hooked := *msg // the hook may keep it; msg itself stays on the stack
		c.onReply(&hooked)
	}
	if c.out != nil {
		c.out.Reply(jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.ID, Value: c.id}))
	}
	m.write(next)
}

// attributeLocked returns the client a server message belongs to when that
// is unambiguous, and the stream to use: the client's latest request in
// flight, else its standalone stream.
func (m *Mux) attributeLocked() (*Client, Stream) {
	var only *Client
	for c := range m.clients {
		if m.opts.Exclusive {
			only = c
			break
		}
		if len(c.calls)+len(c.long) == 0 {
			continue
		}
		if only != nil {
			return nil, nil
		}
		only = c
	}
	if only == nil {
		return nil, nil
	}
	if only.latest != nil && only.latest.out != nil {
		return only, only.latest.out
	}
	return only, only.general
}

// serverRequest routes a request from the server to the one client it can
// belong to, with a gateway id; or answers it here.
func (m *Mux) serverRequest(gen uint64, msg *jsonrpc.Message) {
	upID := bytes.Clone(msg.Bytes(msg.ID))
	if msg.MethodIs("ping") {
		m.sendBestEffort(jsonrpc.Response(upID, []byte(`{}`)))
		return
	}
	m.mu.Lock()
	c, out := m.attributeLocked()
	if c == nil {
		m.mu.Unlock()
		if msg.MethodIs("roots/list") {
			m.sendBestEffort(jsonrpc.Response(upID, m.opts.Roots))
			return
		}
		m.stats.unroutable.Add(1)
		m.log.Warn("server request not routed: no single client session has a request in flight", "method", msg.MethodName())
		m.sendBestEffort(jsonrpc.ErrorResponse(upID, jsonrpc.CodeInternalError,
			"mcpgate: cannot route "+msg.MethodName()+": no single client session to ask"))
		return
	}
	gid := m.nextID
	m.nextID++
	m.serverReqs[gid] = &serverReq{upID: upID, client: c, gen: gen}
	m.mu.Unlock()
	out.Send(jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.ID, Value: appendUint(nil, gid)}))
}

// serverNotification routes a notification from the server.
func (m *Mux) serverNotification(msg *jsonrpc.Message) {
	switch {
	case msg.MethodIs("notifications/progress"):
		m.progress(msg)
	case bytes.HasSuffix(msg.Bytes(msg.Method), []byte(`/list_changed"`)):
		m.broadcast(bytes.Clone(msg.Raw))
	case m.opts.Exclusive:
		m.toAttributed(msg)
	case msg.MethodIs("notifications/message"):
		m.logMessage(msg)
	case msg.MethodIs("notifications/resources/updated"):
		m.resourceUpdated(msg)
	case msg.MethodIs("notifications/cancelled"):
		m.serverCancelled(msg)
	default:
		m.toAttributed(msg)
	}
}

// progress delivers a progress notification to the stream of the request
// whose (rewritten) token it carries, with the client's token restored.
func (m *Mux) progress(msg *jsonrpc.Message) {
	id, ok := parseUint(msg.Bytes(msg.ProgressToken))
	var out Stream
	var fwd []byte
	m.mu.Lock()
	// The call is still pending, so still guarded by the lock: read its
	// token under it (another goroutine may answer the call right after).
	if c := m.pending[id]; ok && c != nil && c.token != nil && c.out != nil {
		out = c.out
		fwd = jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.ProgressToken, Value: c.token})
	}
	m.mu.Unlock()
	if out == nil {
		m.stats.droppedProgress.Add(1)
		return
	}
	out.Send(fwd)
}

// broadcast sends msg to every client's standalone stream.
func (m *Mux) broadcast(msg []byte) {
	m.mu.Lock()
	streams := make([]Stream, 0, len(m.clients))
	for c := range m.clients {
		streams = append(streams, c.general)
	}
	m.mu.Unlock()
	for _, s := range streams {
		s.Send(msg)
	}
}

func (m *Mux) toAttributed(msg *jsonrpc.Message) {
	m.mu.Lock()
	c, out := m.attributeLocked()
	m.mu.Unlock()
	if c == nil {
		m.log.Debug("server notification dropped: no single client session to deliver to", "method", msg.MethodName())
		return
	}
	out.Send(bytes.Clone(msg.Raw))
}

// serverCancelled forwards the server's cancellation of one of its own
// requests to the client that has it, with the gateway id.
func (m *Mux) serverCancelled(msg *jsonrpc.Message) {
	raw := msg.Bytes(msg.CancelRequestID)
	m.mu.Lock()
	var target *serverReq
	var gid uint64
	for id, sr := range m.serverReqs {
		if bytes.Equal(sr.upID, raw) {
			target, gid = sr, id
			break
		}
	}
	if target != nil {
		delete(m.serverReqs, gid)
	}
	m.mu.Unlock()
	if target == nil {
		return
	}
	target.client.general.Send(jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.CancelRequestID, Value: appendUint(nil, gid)}))
}

// logMessage delivers a log notification by level: to the client whose
// request is in flight when that is unambiguous, else to every client that
// asked for this level with logging/setLevel.
func (m *Mux) logMessage(msg *jsonrpc.Message) {
	var p struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(paramsOf(msg.Raw), &p)
	lvl := levelRank(p.Level)
	data := bytes.Clone(msg.Raw)
	m.mu.Lock()
	var outs []Stream
	if c, out := m.attributeLocked(); c != nil {
		if c.level < 0 || lvl >= c.level {
			outs = append(outs, out)
		}
	} else {
		for c := range m.clients {
			if c.level >= 0 && lvl >= c.level {
				outs = append(outs, c.general)
			}
		}
	}
	m.mu.Unlock()
	for _, out := range outs {
		out.Send(data)
	}
}

// resourceUpdated delivers to the clients subscribed to the URI.
func (m *Mux) resourceUpdated(msg *jsonrpc.Message) {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(paramsOf(msg.Raw), &p)
	data := bytes.Clone(msg.Raw)
	m.mu.Lock()
	var outs []Stream
	for c := range m.clients {
		if c.subs[p.URI] {
			outs = append(outs, c.general)
		}
	}
	m.mu.Unlock()
	for _, out := range outs {
		out.Send(data)
	}
}

// paramsOf returns the raw params of a message (slow path only).
func paramsOf(raw []byte) []byte {
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Params
}

var levels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// levelRank orders syslog levels; unknown levels rank lowest (most verbose).
func levelRank(s string) int {
	for i, l := range levels {
		if l == s {
			return i
		}
	}
	return 0
}
