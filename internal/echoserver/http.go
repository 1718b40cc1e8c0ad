package echoserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// primingVersion is the first version whose POSTs get an SSE stream opened
// by a priming event in the mirrored mode (Handler.SSEReplies).
const primingVersion = "2025-11-25"

// maxBodyBytes is the largest POST body accepted (the gateway's default).
const maxBodyBytes = 4 << 20

// Handler serves the fixture over Streamable HTTP at any path (cmd/mcpecho
// mounts it at /mcp). Use [NewHandler]; Close ends its GET streams.
//
// It is deliberately small: no Origin checks, no batches (400), no
// resumption (the retry hint is sent, Last-Event-ID is ignored). Every reply
// is one JSON body, the simplest correct answer the spec allows and so the
// benchmarks' limit; SSEReplies mirrors the gateway's streams instead.
//
// A POST without Mcp-Session-Id that is a request of the stateless
// revision (StatelessVersion) is answered on its own, always with one JSON
// body, and creates no session; see stateless for the checks it gets.
type Handler struct {
	// SSEReplies answers the requests of 2025-11-25 sessions with an SSE
	// stream (a priming event, then the reply) instead of a JSON body: the
	// style a server that always streams would use. Set before serving.
	SSEReplies bool
	// Options change what an echo costs (Scan, Burn). Set before serving.
	Options Options

	mu       sync.Mutex
	sessions map[string]*httpSession // guarded by mu
	closed   chan struct{}           // closed by Close
	once     sync.Once
	streams  atomic.Uint64 // stream ids, for SSE event ids "<stream>-<seq>"
	gets     atomic.Int64  // GET streams open
}

type httpSession struct {
	version string
	getOpen atomic.Bool   // a GET stream is open
	done    chan struct{} // closed when the session is deleted
}

// NewHandler returns a Handler with no sessions.
func NewHandler() *Handler {
	return &Handler{sessions: make(map[string]*httpSession), closed: make(chan struct{})}
}

// Sessions returns the number of live sessions.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// Streams returns the number of GET streams open.
func (h *Handler) Streams() int { return int(h.gets.Load()) }

// Close ends every GET stream and refuses further requests with 503.
func (h *Handler) Close() { h.once.Do(func() { close(h.closed) }) }

var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-h.closed:
		httpError(w, http.StatusServiceUnavailable, "mcpecho: shutting down")
		return
	default:
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.get(w, r)
	case http.MethodDelete:
		h.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, "mcpecho: method not allowed")
	}
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	body := bodies.Get().(*bytes.Buffer)
	defer func() {
		if body.Cap() <= 2*maxBodyBytes {
			body.Reset()
			bodies.Put(body)
		}
	}()
	body.Reset()
	if n := r.ContentLength; n > 0 && n <= maxBodyBytes {
		body.Grow(int(n) + bytes.MinRead) // one allocation for a large body, not a doubling series
	}
	if _, err := body.ReadFrom(io.LimitReader(r.Body, maxBodyBytes+1)); err != nil {
		httpError(w, http.StatusBadRequest, "mcpecho: reading body: "+err.Error())
		return
	}
	if body.Len() > maxBodyBytes {
		httpError(w, http.StatusRequestEntityTooLarge, "mcpecho: body too large")
		return
	}
	msg := body.Bytes()
	if h.Options.Scan && h.scanned(w, r, msg) {
		return
	}
	m, err := jsonrpc.Parse(msg)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if m.Kind == jsonrpc.KindRequest && m.MethodIs("initialize") {
		h.initialize(w, msg)
		return
	}
	if r.Header.Get("Mcp-Session-Id") == "" && stateless(w, r, msg, &m, &h.Options) {
		return
	}
	s := h.lookup(w, r)
	if s == nil {
		return
	}
	if m.Kind != jsonrpc.KindRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	bp := replyBufs.Get().(*[]byte)
	defer replyBufs.Put(bp)
	out := (*bp)[:0]
	if h.SSEReplies && s.version >= primingVersion {
		// Priming event and reply in one write.
		stream := strconv.FormatUint(h.streams.Add(1), 10)
		out, _ = sse.AppendEvent(out, sse.Event{ID: stream + "-0", Retry: time.Second})
		rp := replyBufs.Get().(*[]byte)
		reply, _, _ := h.Options.reply((*rp)[:0], msg, false)
		out, _ = sse.AppendEvent(out, sse.Event{ID: stream + "-1", Event: "message", Data: reply})
		*rp = reply[:0]
		replyBufs.Put(rp)
		hdr := w.Header()
		hdr.Set("Content-Type", "text/event-stream")
		hdr.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
	} else {
		out, _, _ = h.Options.reply(out, msg, false)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	}
	_, _ = w.Write(out)
	*bp = out[:0]
}

// scanned answers msg, an echo of a session's that Options.Scan answers
// from a scan, with one JSON body, and reports true; it reports false,
// having written nothing, for any other message, a POST without a session
// header and a session that gets SSE replies: those are parsed as usual.
func (h *Handler) scanned(w http.ResponseWriter, r *http.Request, msg []byte) bool {
	if r.Header.Get("Mcp-Session-Id") == "" {
		return false
	}
	bp := replyBufs.Get().(*[]byte)
	defer replyBufs.Put(bp)
	out, ok := appendScanned((*bp)[:0], msg)
	*bp = out[:0]
	if !ok {
		return false
	}
	s := h.lookup(w, r)
	if s == nil {
		return true
	}
	if h.SSEReplies && s.version >= primingVersion {
		return false
	}
	h.Options.spend()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
	return true
}

var replyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (h *Handler) initialize(w http.ResponseWriter, msg []byte) {
	reply, version, _ := AppendReply(nil, msg)
	if version != "" {
		var raw [24]byte
		_, _ = rand.Read(raw[:])
		id := hex.EncodeToString(raw[:])
		h.mu.Lock()
		h.sessions[id] = &httpSession{version: version, done: make(chan struct{})}
		h.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", id)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(reply)
}

// stateless answers a POST without a session if it is a request of the
// stateless revision: one whose params._meta names a protocol version, or
// whose MCP-Protocol-Version header is not a session era's. It reports
// false, having written nothing, for anything else (which then needs a
// session).
//
// The checks are the few a client of the revision can get wrong on the
// paths a benchmark takes, in the revision's order: the header present
// and equal to the _meta version, Mcp-Method equal to the method (400,
// CodeHeaderMismatch; 400, -32602 for a missing _meta version), then the
// version (400, CodeUnsupportedVersion). Mcp-Name and clientCapabilities
// are not checked. The reply is always one JSON body.
func stateless(w http.ResponseWriter, r *http.Request, msg []byte, m *jsonrpc.Message, o *Options) bool {
	header := r.Header.Get("Mcp-Protocol-Version")
	legacyHeader := header == "" || slices.Contains(Versions, header)
	if m.Kind != jsonrpc.KindRequest {
		if legacyHeader {
			return false
		}
		w.WriteHeader(http.StatusAccepted) // the revision defines none over HTTP: accepted and dropped
		return true
	}
	bp := replyBufs.Get().(*[]byte)
	defer replyBufs.Put(bp)
	out, version, _ := o.reply((*bp)[:0], msg, false)
	*bp = out[:0]
	if version == "" && legacyHeader {
		return false
	}
	id := m.Bytes(m.ID)
	status := http.StatusOK
	switch {
	case header == "":
		status, out = http.StatusBadRequest, jsonrpc.AppendErrorResponse(out[:0], id, CodeHeaderMismatch, "missing MCP-Protocol-Version header")
	case version == "":
		status, out = http.StatusBadRequest, jsonrpc.AppendErrorResponse(out[:0], id, codeInvalidParams,
			`params._meta["`+KeyProtocolVersion+`"] is required`)
	case version != header:
		status, out = http.StatusBadRequest, jsonrpc.AppendErrorResponse(out[:0], id, CodeHeaderMismatch,
			"MCP-Protocol-Version header does not match params._meta")
	case !m.MethodIs(r.Header.Get("Mcp-Method")):
		status, out = http.StatusBadRequest, jsonrpc.AppendErrorResponse(out[:0], id, CodeHeaderMismatch,
			"Mcp-Method header does not match the method")
	case version != StatelessVersion:
		status = http.StatusBadRequest // out is AppendReply's CodeUnsupportedVersion error
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	_, _ = w.Write(out)
	*bp = out[:0]
	return true
}

// lookup finds the request's session or answers 400 (no header) or 404.
func (h *Handler) lookup(w http.ResponseWriter, r *http.Request) *httpSession {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		httpError(w, http.StatusBadRequest, "mcpecho: missing Mcp-Session-Id")
		return nil
	}
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s == nil {
		httpError(w, http.StatusNotFound, "mcpecho: session not found")
	}
	return s
}

// get holds the session's standalone stream open until the client leaves,
// the session is deleted or the handler closes. The fixture never sends on
// it; it exists so that idle benchmarks can hold streams against a baseline.
func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	s := h.lookup(w, r)
	if s == nil {
		return
	}
	if !s.getOpen.CompareAndSwap(false, true) {
		httpError(w, http.StatusConflict, "mcpecho: stream already open")
		return
	}
	defer s.getOpen.Store(false)
	h.gets.Add(1)
	defer h.gets.Add(-1)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if s.version >= primingVersion {
		_ = sse.Write(w, sse.Event{ID: "0-0", Retry: time.Second})
	}
	_ = http.NewResponseController(w).Flush()
	select {
	case <-r.Context().Done():
	case <-s.done:
	case <-h.closed:
	}
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	h.mu.Lock()
	s := h.sessions[id]
	delete(h.sessions, id)
	h.mu.Unlock()
	if s == nil {
		httpError(w, http.StatusNotFound, "mcpecho: session not found")
		return
	}
	close(s.done)
	w.WriteHeader(http.StatusNoContent)
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(jsonrpc.ErrorResponse(nil, codeInvalidRequest, msg))
}
