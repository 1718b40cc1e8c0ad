package testkit

import (
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// toolList is the fake's tools/list result. Each tool's behavior is described
// in its "description" and implemented in callTool.
var toolList = []map[string]any{
	tool("echo", "Returns message. With params._meta.progressToken, first sends progress 1..3 of 3.",
		map[string]any{"message": prop("string")}, "message"),
	tool("slow", "Waits ms milliseconds, or until cancelled (then sends no reply); returns \"done\". "+
		"With started and params._meta.progressToken, first sends progress 0 of 1.",
		map[string]any{"ms": prop("integer"), "started": prop("boolean")}, "ms"),
	tool("crash", "Exits the server process with status 3, without replying.", nil),
	tool("sample", "Asks the client for sampling/createMessage with prompt; returns its text.",
		map[string]any{"prompt": prop("string")}, "prompt"),
	tool("roots", "Asks the client for roots/list; returns the result JSON as text.", nil),
	tool("log", "Sends notifications/message at level (if not below logging/setLevel); returns \"logged\" or \"filtered\".",
		map[string]any{"level": prop("string"), "message": prop("string")}, "level", "message"),
	tool("touch", "Sends notifications/resources/updated for uri (subscribed or not; while listens are open: to those that select it); returns \"touched\".",
		map[string]any{"uri": prop("string")}, "uri"),
	tool("list_changed", "Sends notifications/<kind>/list_changed (kind tools, the default, prompts or resources; while listens are open: to those that select it), count times (default 1, at most 100000); returns \"ok\".",
		map[string]any{"kind": prop("string"), "count": prop("integer")}),
	tool("big", "Returns a text of bytes 'x' characters.",
		map[string]any{"bytes": prop("integer")}, "bytes"),
	tool("cancelled", "Returns the JSON array of request ids named by notifications/cancelled so far.", nil),
	tool("level", "Returns the last logging/setLevel level, or \"\".", nil),
	tool("initialized", "Returns \"true\" if this process received initialize, else \"false\".", nil),
	tool("pid", "Returns the process id of this process.", nil),
	tool("capabilities", "Returns the client capabilities of the initialize this process received (JSON), or \"\".", nil),
	tool("calls", "Returns the JSON {\"inflight\":[...],\"cancelled\":[...]}: the method and params of the requests in flight (this one excluded) and of those notifications/cancelled cancelled while in flight.", nil),
	tool("end_listens", "Ends every open subscriptions/listen with its final result; returns how many.", nil),
}

func tool(name, desc string, props map[string]any, required ...string) map[string]any {
	if props == nil {
		props = map[string]any{}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return map[string]any{"name": name, "description": desc, "inputSchema": schema}
}

func prop(typ string) map[string]any { return map[string]any{"type": typ} }

// logLevels in increasing severity (RFC 5424, as MCP uses them).
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func severity(level string) int {
	for i, l := range logLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// textResult is a CallToolResult with one text content block.
func textResult(text string, isError bool) map[string]any {
	r := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
	if isError {
		r["isError"] = true
	}
	return r
}

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"_meta"`
	// RequestState is a retry's state (2026-07-28; the mrtr_state tool).
	RequestState *string `json:"requestState"`
}

type toolArgs struct {
	Message string  `json:"message"`
	MS      float64 `json:"ms"`
	Prompt  string  `json:"prompt"`
	Level   string  `json:"level"`
	URI     string  `json:"uri"`
	Bytes   int     `json:"bytes"`
	Kind    string  `json:"kind"`
	Count   int     `json:"count"`
	Started bool    `json:"started"`
}

// callTool runs tools/call. done is closed if the request is cancelled.
func (s *server) callTool(m message, done <-chan struct{}) {
	var p callParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		s.replyError(m.ID, codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	var a toolArgs
	if len(p.Arguments) > 0 {
		if err := json.Unmarshal(p.Arguments, &a); err != nil {
			s.replyError(m.ID, codeInvalidParams, "invalid arguments: "+err.Error())
			return
		}
	}
	switch p.Name {
	case "echo":
		if tok := p.Meta.ProgressToken; len(tok) > 0 && string(tok) != "null" {
			for i := 1; i <= 3; i++ {
				s.notify("notifications/progress", map[string]any{
					"progressToken": tok, "progress": i, "total": 3,
				})
			}
		}
		s.reply(m.ID, textResult(a.Message, false))
	case "slow":
		if tok := p.Meta.ProgressToken; a.Started && len(tok) > 0 && string(tok) != "null" {
			s.notify("notifications/progress", map[string]any{"progressToken": tok, "progress": 0, "total": 1})
		}
		t := time.NewTimer(time.Duration(a.MS * float64(time.Millisecond)))
		defer t.Stop()
		select {
		case <-t.C:
			s.reply(m.ID, textResult("done", false))
		case <-done:
			// Per spec, a cancelled request gets no response.
		}
	case "crash":
		os.Exit(3)
	case "sample":
		s.sample(m.ID, a.Prompt, done)
	case "roots":
		res, err := s.call("roots/list", struct{}{}, done)
		switch {
		case err == errCancelled:
		case err != nil:
			s.reply(m.ID, textResult(err.Error(), true))
		default:
			s.reply(m.ID, textResult(string(res), false))
		}
	case "log":
		s.mu.Lock()
		min := severity(s.level)
		s.mu.Unlock()
		if severity(a.Level) < min || severity(a.Level) < 0 {
			s.reply(m.ID, textResult("filtered", false))
			return
		}
		s.notify("notifications/message", map[string]any{"level": a.Level, "logger": "fake", "data": a.Message})
		s.reply(m.ID, textResult("logged", false))
	case "touch":
		if !s.toListens("notifications/resources/updated", a.URI, map[string]any{"uri": a.URI}) {
			s.notify("notifications/resources/updated", map[string]any{"uri": a.URI})
		}
		s.reply(m.ID, textResult("touched", false))
	case "list_changed":
		kind := a.Kind
		switch kind {
		case "":
			kind = "tools"
		case "tools", "prompts", "resources":
		default:
			s.replyError(m.ID, codeInvalidParams, "kind must be tools, prompts or resources")
			return
		}
		method := "notifications/" + kind + "/list_changed"
		for range min(max(a.Count, 1), 100000) {
			if !s.toListens(method, "", nil) {
				s.notify(method, struct{}{})
			}
		}
		s.reply(m.ID, textResult("ok", false))
	case "big":
		s.reply(m.ID, textResult(strings.Repeat("x", max(a.Bytes, 0)), false))
	case "cancelled":
		s.mu.Lock()
		ids := append([]json.RawMessage{}, s.cancelled...)
		s.mu.Unlock()
		s.reply(m.ID, textResult(string(mustJSON(ids)), false))
	case "level":
		s.mu.Lock()
		level := s.level
		s.mu.Unlock()
		s.reply(m.ID, textResult(level, false))
	case "initialized":
		s.mu.Lock()
		init := s.initialized
		s.mu.Unlock()
		s.reply(m.ID, textResult(strconv.FormatBool(init), false))
	case "capabilities":
		s.mu.Lock()
		caps := string(s.clientCaps)
		s.mu.Unlock()
		s.reply(m.ID, textResult(caps, false))
	case "pid":
		s.reply(m.ID, textResult(strconv.Itoa(os.Getpid()), false))
	case "mrtr_state":
		// Not listed. As a server of 2026-07-28 keeping its own state:
		// without a requestState, answers input_required with one
		// elicitation and the state "srv:" + message; with one, returns
		// "state " + the state it got back.
		if p.RequestState != nil {
			s.reply(m.ID, textResult("state "+*p.RequestState, false))
			break
		}
		s.reply(m.ID, map[string]any{"resultType": "input_required", "requestState": "srv:" + a.Message,
			"inputRequests": map[string]any{"q": map[string]any{"method": "elicitation/create",
				"params": map[string]any{"message": "ok?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}}}}})
	case "meta":
		// Not listed. Returns params._meta byte for byte as it arrived
		// (compacted by the gateway), or "" without one.
		var pm struct {
			Meta json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &pm)
		s.reply(m.ID, textResult(string(pm.Meta), false))
	case "notified":
		// Not listed. The methods of every message without an id this
		// process received, in order (a JSON array).
		s.mu.Lock()
		got := append([]string{}, s.notified...)
		s.mu.Unlock()
		s.reply(m.ID, textResult(string(mustJSON(got)), false))
	case "subscribed":
		// Not listed. The resource URIs this process is subscribed to
		// (resources/subscribe not undone by resources/unsubscribe), sorted,
		// as a JSON array.
		s.mu.Lock()
		uris := make([]string, 0, len(s.subscribed))
		for uri := range s.subscribed {
			uris = append(uris, uri)
		}
		s.mu.Unlock()
		sort.Strings(uris)
		s.reply(m.ID, textResult(string(mustJSON(uris)), false))
	case "calls":
		self := idKey(m.ID)
		out := struct {
			Inflight  []callRecord `json:"inflight"`
			Cancelled []callRecord `json:"cancelled"`
		}{Inflight: []callRecord{}} // [] rather than null when none
		s.mu.Lock()
		for k, r := range s.inflight {
			// Not itself, nor an earlier calls whose reply went out before
			// its entry was removed: the client may ask again in between.
			if k != self && !isCallsTool(r.rec) {
				out.Inflight = append(out.Inflight, r.rec)
			}
		}
		out.Cancelled = append([]callRecord{}, s.cancelCalls...)
		s.mu.Unlock()
		s.reply(m.ID, textResult(string(mustJSON(out)), false))
	case "end_listens":
		s.reply(m.ID, textResult(strconv.Itoa(s.endListens()), false))
	default:
		if !s.callExtraTool(m.ID, p.Name, a) {
			s.replyError(m.ID, codeInvalidParams, "unknown tool: "+p.Name)
		}
	}
}

// sample implements the sample tool: one sampling/createMessage round trip.
func (s *server) sample(id json.RawMessage, prompt string, done <-chan struct{}) {
	res, err := s.call("sampling/createMessage", map[string]any{
		"messages": []any{map[string]any{
			"role": "user", "content": map[string]any{"type": "text", "text": prompt},
		}},
		"maxTokens": 100,
	}, done)
	if err == errCancelled {
		return
	}
	if err != nil {
		s.reply(id, textResult("sampling failed: "+err.Error(), true))
		return
	}
	// content is one block (2025-06-18) or, since 2025-11-25, possibly a list.
	var r struct {
		Content json.RawMessage `json:"content"`
	}
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	var blocks []block
	if json.Unmarshal(res, &r) == nil {
		var one block
		if json.Unmarshal(r.Content, &one) == nil {
			blocks = append(blocks, one)
		} else {
			_ = json.Unmarshal(r.Content, &blocks)
		}
	}
	for _, b := range blocks {
		if b.Type == "text" {
			s.reply(id, textResult(b.Text, false))
			return
		}
	}
	s.reply(id, textResult("sampling result has no text content: "+string(res), true))
}

// isCallsTool reports whether rec is a call of the calls tool.
func isCallsTool(rec callRecord) bool {
	var p struct {
		Name string `json:"name"`
	}
	return rec.Method == "tools/call" && json.Unmarshal(rec.Params, &p) == nil && p.Name == "calls"
}
