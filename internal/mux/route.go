package mux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// This file is the upstream side: the handler methods the upstream's reader
// goroutine calls, and the routing of what the server sends.

// Started is called when process generation gen has started: the server
// is Starting until the generation is initialized.
func (m *Mux) Started(gen uint64) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	if m.readyLocked() {
		m.ready = make(chan struct{}) // a new generation without Exited for the old one
	}
	m.gen, m.running, m.genStart = gen, true, time.Now()
	if m.mode == modeModern {
		// A new process gets its own verdict: what the last one answered
		// says nothing about it until its probe does.
		m.probeErr, m.discover = nil, nil
	}
	m.setStateLocked(Starting, nil, time.Time{})
	m.wg.Add(1) // under mu, before Close can start waiting
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		m.runGen(gen)
	}()
}

// runGen initializes generation gen, retrying as initFailed arranges, then
// runs its liveness probe (when configured) while it lives.
func (m *Mux) runGen(gen uint64) {
	if m.mode == modeModern {
		m.runModernGen(gen) // probes with server/discover instead (modern.go)
		return
	}
	for {
		err := m.initializeUpstream(gen)
		if err == nil {
			break
		}
		if errors.Is(err, errGenGone) {
			m.log.Debug("process generation gone before it was ready", "gen", gen)
			return
		}
		// A process that exited during initialize, or a gateway closing, is
		// not an initialize failure: the exit line (or the shutdown) says
		// it all. Only the initialize itself failing (an error answer, no
		// answer in time, a bad result) is worth a warning.
		if errors.Is(err, errExited) || errors.Is(err, errClosed) || !m.current(gen) {
			m.log.Debug("initialize ended with its process generation", "gen", gen, "err", err)
		} else {
			m.log.Warn("upstream initialize failed", "gen", gen, "err", err)
		}
		if !m.initFailed(gen, err) {
			return
		}
	}
	if m.opts.PingInterval > 0 {
		m.probe(gen)
	}
}

// Exited is called when process generation gen has exited: every request
// pending on it is answered at once with an error naming err, and the
// server is BackingOff (until Waiting says when it retries, or Started).
func (m *Mux) Exited(gen uint64, err error) {
	m.mu.Lock()
	if gen != m.gen {
		m.mu.Unlock()
		return
	}
	wasReady := m.readyLocked()
	m.running = false
	if wasReady {
		m.ready = make(chan struct{})
	}
	reason := err
	if reason == nil {
		reason = errExited
	}
	if !m.closed {
		m.setStateLocked(BackingOff, reason, time.Time{})
		m.wakeLocked()
	}
	calls := m.takeAllLocked()
	m.mu.Unlock()
	if err != nil {
		// The only line for an unexpected exit: err (an upstream.ExitError
		// for a process) holds the status, uptime, why the gateway killed
		// it, and the last stderr lines; the upstream does not log it again.
		m.log.Warn("upstream exited", "gen", gen, "err", err, "failed_requests", len(calls))
	}
	m.failCallsCause(calls, m.notAvailable(reason), reason)
}

// Oversized is called for a line over the line limit. If its prefix shows
// the id of a pending request in its envelope (jsonrpc.PrefixID: only the
// envelope's own id, so that no other session's call fails), that request
// fails now instead of timing out.
func (m *Mux) Oversized(gen uint64, prefix []byte, size int) {
	m.stats.oversized.Add(1) // the upstream logged it
	if id, ok := parseUint(jsonrpc.PrefixID(prefix)); ok {
		m.finish(id, func(c *call) {
			m.fail(c, protocol.CodeInternalError, fmt.Sprintf("mcpgate: reply of %d bytes exceeds the line limit", size))
		})
	}
}

// Line routes one message read from the server.
func (m *Mux) Line(gen uint64, line []byte) {
	msg, err := jsonrpc.Parse(line)
	if err != nil {
		m.stats.garbage.Add(1)
		if ok, n := m.warnGarbage.allow(); ok {
			m.log.Warn("upstream wrote a line that is not JSON-RPC; skipped", "err", err, "bytes", len(line), "suppressed", n)
		}
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
		if ok, n := m.warnUnknown.allow(); ok {
			m.log.Info("upstream reply matches no pending request (late or unknown); dropped", "id", string(msg.Bytes(msg.ID)), "suppressed", n)
		}
		return
	}
	if c.client != nil && !c.noServe && m.servedGen.Load() != c.gen {
		m.markServed(c.gen)
	}
	if c.onReply != nil {
		hooked := *msg // the hook may keep it; msg itself stays on the stack
		c.onReply(&hooked)
	}
	if c.out != nil {
		var sub jsonrpc.Edit // a listen's final result names its subscription
		if c.listen {
			span, _ := eras.SubscriptionSpan(msg.Raw, "result")
			sub = jsonrpc.Edit{Span: span, Value: c.id}
		}
		c.out.Reply(jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.ID, Value: c.id}, sub))
	}
	m.write(next)
}

// markServed tells the upstream, once per generation, that gen answered a
// client request (so its crash-loop backoff may reset).
func (m *Mux) markServed(gen uint64) {
	if m.servedGen.Swap(gen) == gen {
		return
	}
	if up := m.upstreamNow(); up != nil {
		up.Served(gen)
	}
}

// capability is a set of client capabilities a server request may need.
type capability uint8

const (
	capSampling capability = 1 << iota
	capElicitation
	capRoots
)

// capabilityFor returns the client capability a server request needs, or
// 0 for requests any client can answer.
func capabilityFor(msg *jsonrpc.Message) capability {
	switch {
	case msg.MethodIs(protocol.MethodSamplingCreateMessage):
		return capSampling
	case msg.MethodIs(protocol.MethodElicitationCreate):
		return capElicitation
	case msg.MethodIs(protocol.MethodRootsList):
		return capRoots
	}
	return 0
}

// parseCapabilities reads the capabilities a client declared in its
// initialize params.
func parseCapabilities(params []byte) capability {
	var p struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &p)
	var caps capability
	for k, v := range p.Capabilities {
		if string(v) == "null" {
			continue
		}
		switch k {
		case "sampling":
			caps |= capSampling
		case "elicitation":
			caps |= capElicitation
		case "roots":
			caps |= capRoots
		}
	}
	return caps
}

// attributeLocked returns the client a server message belongs to, and the
// stream to use (the client's latest request in flight, else its
// standalone stream); nil when that is not certain. In exclusive mode that
// is the one client. In shared mode it is the only session with a request
// written to the process (queued ones do not count: the server has not seen
// them), and only if it declared need (a server request's capability).
//
// It runs for every message a shared server sends unasked (a log line
// during a call, a progress without a token of ours), so it looks at the
// clients that have calls written (m.writers), never at every client.
func (m *Mux) attributeLocked(need capability) (*Client, conn.Stream) {
	var only *Client
	switch {
	case m.mode == modeExclusive:
		for c := range m.clients {
			only = c
		}
	case len(m.writers) == 1:
		for c := range m.writers {
			only = c
		}
	}
	if only == nil || (m.mode != modeExclusive && only.caps&need != need) {
		return nil, nil
	}
	if only.latest != nil && only.latest.out != nil && !only.latest.queued {
		return only, only.latest.out
	}
	return only, only.general
}

// serverRequest routes a request from the server to the one client it can
// belong to, with a gateway id; or answers it here. Answers are best
// effort: this is the reader's goroutine, it never waits on the server.
func (m *Mux) serverRequest(gen uint64, msg *jsonrpc.Message) {
	upID := bytes.Clone(msg.Bytes(msg.ID))
	if msg.MethodIs(protocol.MethodPing) {
		m.trySendGen(gen, jsonrpc.Response(upID, []byte(`{}`)), "ping answer")
		return
	}
	if m.mode == modeModern {
		m.refuseModern(gen, upID, msg)
		return
	}
	m.mu.Lock()
	if len(m.serverReqs) >= maxServerRequests {
		m.mu.Unlock()
		m.stats.serverReqsOverLimit.Add(1)
		if ok, n := m.warnServerReqs.allow(); ok {
			m.log.Warn("server request refused: too many server requests waiting for a client's answer",
				"method", msg.MethodName(), "limit", maxServerRequests, "suppressed", n)
		}
		m.trySendGen(gen, jsonrpc.ErrorResponse(upID, protocol.CodeInternalError,
			fmt.Sprintf("mcpgate: cannot route %s: %d server requests already wait for a client's answer", msg.MethodName(), maxServerRequests)),
			"refusal of a server request")
		return
	}
	c, out, related := m.taskAttributeLocked(msg, capabilityFor(msg)) // tasks.go
	if !related {
		c, out = m.attributeLocked(capabilityFor(msg))
	}
	if c == nil {
		m.mu.Unlock()
		if msg.MethodIs(protocol.MethodRootsList) {
			m.trySendGen(gen, jsonrpc.Response(upID, m.opts.Roots), "roots/list answer")
			return
		}
		m.stats.unroutable.Add(1)
		if ok, n := m.warnUnroutable.allow(); ok {
			m.log.Warn("server request refused: no single client session with a request in flight that declared the capability",
				"method", msg.MethodName(), "suppressed", n)
		}
		m.trySendGen(gen, jsonrpc.ErrorResponse(upID, protocol.CodeInternalError,
			"mcpgate: cannot route "+msg.MethodName()+": no single client session to ask"), "refusal of a server request")
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
	if m.mode == modeModern {
		m.modernNotification(msg)
		return
	}
	switch {
	case msg.MethodIs(protocol.NotificationProgress):
		m.progress(msg)
	case bytes.HasSuffix(msg.Bytes(msg.Method), []byte(`/list_changed"`)):
		m.broadcast(bytes.Clone(msg.Raw))
	case m.mode == modeExclusive:
		m.toAttributed(msg)
	case msg.MethodIs(protocol.NotificationMessage):
		m.logMessage(msg)
	case msg.MethodIs(protocol.NotificationResourcesUpdated):
		m.resourceUpdated(msg)
	case msg.MethodIs(protocol.NotificationCancelled):
		m.serverCancelled(msg)
	case msg.MethodIs(protocol.NotificationTasksStatus):
		m.taskStatus(msg) // tasks.go: to the task's creator only
	default:
		m.toAttributed(msg)
	}
}

// progress delivers a progress notification to the stream of the request
// whose (rewritten) token it carries, with the client's token restored.
func (m *Mux) progress(msg *jsonrpc.Message) {
	id, ok := parseUint(msg.Bytes(msg.ProgressToken))
	var out conn.Stream
	var fwd []byte
	m.mu.Lock()
	// The call is still pending, so still guarded by the lock: read its
	// token under it (another goroutine may answer the call right after).
	if c := m.pending[id]; ok && c != nil && c.token != nil && c.out != nil {
		out = c.out
		fwd = jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.ProgressToken, Value: c.token})
	} else if ok {
		out, fwd = m.taskProgressLocked(id, msg) // tasks.go: a task's, after its CreateTaskResult
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
	streams := make([]conn.Stream, 0, len(m.clients))
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
	c, out := m.attributeLocked(0)
	m.mu.Unlock()
	if c == nil {
		m.stats.droppedNotes.Add(1)
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

// resourceUpdated delivers to the clients subscribed to the URI (m.subs:
// never a walk of every client).
func (m *Mux) resourceUpdated(msg *jsonrpc.Message) {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(paramsOf(msg.Raw), &p)
	data := bytes.Clone(msg.Raw)
	m.mu.Lock()
	var outs []conn.Stream
	for c := range m.subs[p.URI] {
		outs = append(outs, c.general)
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

// Interface guard: the Mux is the Handler of either kind of upstream
// (a stdio process calls Waiting too; a remote session never does).
var _ upstream.Supervised = (*Mux)(nil)
