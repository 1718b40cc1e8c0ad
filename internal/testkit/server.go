package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
)

// Protocol versions the fake speaks, latest first.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// FakeServerName is the serverInfo.name the fake MCP server reports.
const FakeServerName = "mcptest-fake"

// FakeServerVersion is the serverInfo.version the fake MCP server reports.
const FakeServerVersion = "1.0.0"

// JSON-RPC and MCP error codes used by the fake.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeResourceNotFnd = -32002
)

// message is any JSON-RPC 2.0 message; which fields are set tells its kind.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// server is the fake MCP server inside the child process.
type server struct {
	opts FakeOptions

	wmu sync.Mutex // serializes whole lines on out
	out io.Writer

	mu sync.Mutex
	// guarded by mu:
	level       string                  // last logging/setLevel level
	cancelled   []json.RawMessage       // request ids named by notifications/cancelled, in order
	inflight    map[string]*inflightReq // request id -> the request, while it runs
	cancelCalls []callRecord            // the requests notifications/cancelled cancelled while in flight, in order
	outgoing    map[string]chan message // our request id -> its reply
	nextOut     int                     // last id used for a server-to-client request
	subscribed  map[string]bool         // resource URIs subscribed to
	initialized bool                    // initialize was received
	initDone    bool                    // notifications/initialized was received
	clientCaps  json.RawMessage         // the capabilities of the initialize received
	notified    []string                // methods of the messages without id received, in order (the first maxNotified)

	// lmu orders what is written about listens (acknowledgements, tagged
	// notifications, final results); taken before wmu, never with mu.
	lmu     sync.Mutex
	listens map[string]*fakeListen // guarded by lmu: open subscriptions/listen requests (Modern), by id

	tasks taskTable // FakeOptions.Tasks (tasks.go)

	wg sync.WaitGroup // request handlers
}

// inflightReq is a request being handled.
type inflightReq struct {
	done chan struct{} // closed when cancelled
	rec  callRecord
}

// callRecord is a request as the tool "calls" reports it.
type callRecord struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

func newServer(opts FakeOptions, out io.Writer) *server {
	return &server{
		opts:       opts,
		out:        out,
		inflight:   make(map[string]*inflightReq),
		listens:    make(map[string]*fakeListen),
		outgoing:   make(map[string]chan message),
		subscribed: make(map[string]bool),
	}
}

// idKey normalizes a raw JSON id for map lookups: 7 and 7.0 stay distinct,
// but insignificant whitespace does not matter.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// serve reads stdin until EOF. Requests run concurrently; notifications and
// replies are handled inline, which keeps cancellation ordered with respect to
// the request it cancels.
func (s *server) serve(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			s.dispatch(line)
		}
		if err != nil {
			return
		}
	}
}

func (s *server) dispatch(line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		s.write(message{ID: json.RawMessage("null"), Error: &rpcError{Code: codeParseError, Message: "parse error: " + err.Error()}})
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		// Register before handing off, so a cancellation that follows at
		// once always finds its request.
		done := make(chan struct{})
		key := idKey(m.ID)
		s.mu.Lock()
		s.inflight[key] = &inflightReq{done: done, rec: callRecord{Method: m.Method, Params: m.Params}}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				if r := s.inflight[key]; r != nil && r.done == done {
					delete(s.inflight, key)
				}
				s.mu.Unlock()
			}()
			s.handleRequest(m, done)
		}()
	case m.Method != "":
		s.handleNotification(m)
	case hasID && (m.Result != nil || m.Error != nil):
		s.mu.Lock()
		ch := s.outgoing[idKey(m.ID)]
		delete(s.outgoing, idKey(m.ID))
		s.mu.Unlock()
		if ch != nil {
			ch <- m // buffered
		}
	default:
		s.write(message{ID: json.RawMessage("null"), Error: &rpcError{Code: codeInvalidRequest, Message: "invalid request"}})
	}
}

// maxNotified bounds the methods the tool "notified" reports.
const maxNotified = 1000

func (s *server) handleNotification(m message) {
	s.mu.Lock()
	if len(s.notified) < maxNotified {
		s.notified = append(s.notified, m.Method)
	}
	s.mu.Unlock()
	switch m.Method {
	case "notifications/initialized":
		s.mu.Lock()
		s.initDone = true
		s.mu.Unlock()
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) != nil || len(p.RequestID) == 0 {
			return
		}
		s.mu.Lock()
		s.cancelled = append(s.cancelled, p.RequestID)
		if r, ok := s.inflight[idKey(p.RequestID)]; ok {
			close(r.done)
			delete(s.inflight, idKey(p.RequestID))
			s.cancelCalls = append(s.cancelCalls, r.rec)
		}
		s.mu.Unlock()
	default:
		// notifications/initialized, roots/list_changed, ...: nothing to do.
	}
}

// write sends one message as one line. Callers never hold s.mu.
func (s *server) write(m message) {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	b = append(b, '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.out.Write(b); err != nil {
		// The reader of our stdout is gone; a real server would exit too.
		os.Exit(1)
	}
}

func (s *server) reply(id json.RawMessage, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		panic(err)
	}
	s.write(message{ID: id, Result: b})
}

func (s *server) replyError(id json.RawMessage, code int, msg string) {
	s.write(message{ID: id, Error: &rpcError{Code: code, Message: msg}})
}

func (s *server) notify(method string, params any) {
	b, err := json.Marshal(params)
	if err != nil {
		panic(err)
	}
	s.write(message{Method: method, Params: b})
}

// call sends a server-to-client request and waits for its reply, or until
// done (the originating request was cancelled) is closed.
func (s *server) call(method string, params any, done <-chan struct{}) (json.RawMessage, error) {
	ch := make(chan message, 1)
	s.mu.Lock()
	s.nextOut++
	id := json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("s-%d", s.nextOut)))
	s.outgoing[idKey(id)] = ch
	s.mu.Unlock()

	b, err := json.Marshal(params)
	if err != nil {
		panic(err)
	}
	s.write(message{ID: id, Method: method, Params: b})
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-done:
		s.mu.Lock()
		delete(s.outgoing, idKey(id))
		s.mu.Unlock()
		s.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": "tool call cancelled"})
		return nil, errCancelled
	}
}

var errCancelled = fmt.Errorf("cancelled")

func (s *server) handleRequest(m message, done <-chan struct{}) {
	if s.opts.StrictInit && m.Method != "initialize" && m.Method != "ping" {
		s.mu.Lock()
		ready := s.initDone
		s.mu.Unlock()
		if !ready {
			s.replyError(m.ID, codeInvalidRequest, "received request before initialization was complete")
			return
		}
	}
	if s.handleTasks(m, done) { // tasks.go
		return
	}
	switch m.Method {
	case "initialize":
		if s.opts.ModernOnly {
			s.replyError(m.ID, codeMethodNotFound, "method not found: initialize (this server speaks 2026-07-28 only)")
			return
		}
		s.mu.Lock()
		s.initialized = true
		s.mu.Unlock()
		s.initialize(m)
	case "server/discover":
		switch {
		case s.opts.IgnoreDiscover:
		case s.opts.Modern:
			s.discover(m)
		default:
			s.replyError(m.ID, codeMethodNotFound, "method not found: "+m.Method)
		}
	case "ping":
		s.reply(m.ID, struct{}{})
	case "tools/list":
		s.listTools(m, done)
	case "tools/call":
		s.callTool(m, done)
	case "subscriptions/listen":
		if !s.opts.Modern {
			s.replyError(m.ID, codeMethodNotFound, "method not found: "+m.Method)
			return
		}
		s.listen(m, done)
	case "logging/setLevel":
		var p struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(m.Params, &p) != nil || severity(p.Level) < 0 {
			s.replyError(m.ID, codeInvalidParams, "invalid log level")
			return
		}
		s.mu.Lock()
		s.level = p.Level
		s.mu.Unlock()
		s.reply(m.ID, struct{}{})
	case "resources/list":
		s.reply(m.ID, map[string]any{"resources": s.resources()})
	case "resources/templates/list":
		s.reply(m.ID, map[string]any{"resourceTemplates": s.templates()})
	case "resources/read":
		s.readResource(m)
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.URI == "" {
			s.replyError(m.ID, codeInvalidParams, "uri required")
			return
		}
		s.mu.Lock()
		if m.Method == "resources/subscribe" {
			s.subscribed[p.URI] = true
		} else {
			delete(s.subscribed, p.URI)
		}
		s.mu.Unlock()
		s.reply(m.ID, struct{}{})
	case "prompts/list":
		s.listPrompts(m)
	case "prompts/get":
		s.getPrompt(m)
	case "completion/complete":
		if c := s.opts.Catalog; len(c.Prompts) == 0 && len(c.ResourceTemplates) == 0 {
			s.replyError(m.ID, codeMethodNotFound, "method not found: "+m.Method)
			return
		}
		s.complete(m)
	default:
		s.replyError(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

func (s *server) initialize(m message) {
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(m.Params, &p)
	s.mu.Lock()
	s.clientCaps = p.Capabilities
	s.mu.Unlock()
	version := protocolVersions[0]
	if slices.Contains(protocolVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	if s.opts.ListChangedBeforeInit {
		s.notify("notifications/tools/list_changed", struct{}{})
	}
	caps := map[string]any{
		"tools":     map[string]any{"listChanged": true},
		"resources": map[string]any{"subscribe": true, "listChanged": true},
		"logging":   map[string]any{},
		"prompts":   map[string]any{},
	}
	if c := s.opts.Catalog; len(c.Prompts) > 0 || len(c.ResourceTemplates) > 0 {
		caps["completions"] = map[string]any{}
	}
	if s.opts.Tasks {
		caps["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
	}
	s.reply(m.ID, map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"serverInfo":      map[string]any{"name": FakeServerName, "version": FakeServerVersion},
	})
}

// discover answers server/discover as a dual-era server (FakeOptions.Modern).
func (s *server) discover(m message) {
	s.reply(m.ID, map[string]any{
		"resultType":        "complete",
		"supportedVersions": append([]string{"2026-07-28"}, protocolVersions...),
		"capabilities": map[string]any{
			"tools":     map[string]any{"listChanged": true},
			"resources": map[string]any{"subscribe": true, "listChanged": true},
			"logging":   map[string]any{},
			"prompts":   map[string]any{},
		},
		"ttlMs":      0,
		"cacheScope": "public",
		"_meta": map[string]any{
			"io.modelcontextprotocol/serverInfo": map[string]any{"name": FakeServerName, "version": FakeServerVersion},
		},
	})
}

var resourceList = []map[string]any{
	{"uri": "mem://a", "name": "a", "mimeType": "text/plain"},
	{"uri": "mem://b", "name": "b", "mimeType": "text/plain"},
}

func (s *server) readResource(m message) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.URI == "" {
		s.replyError(m.ID, codeInvalidParams, "uri required")
		return
	}
	for _, r := range s.resources() {
		if r["uri"] == p.URI || s.templated(p.URI) {
			s.reply(m.ID, map[string]any{"contents": []any{map[string]any{
				"uri": p.URI, "mimeType": "text/plain", "text": "content of " + p.URI,
			}}})
			return
		}
	}
	s.write(message{ID: m.ID, Error: &rpcError{
		Code: codeResourceNotFnd, Message: "resource not found",
		Data: mustJSON(map[string]string{"uri": p.URI}),
	}})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
