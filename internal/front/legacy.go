package front

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/admission"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// This file is the 2024-11-05 HTTP+SSE transport: a GET opens the session's
// one stream, whose first event, "endpoint", names the URL to POST messages
// to; every reply and server message arrives on that stream. A session ends
// when its stream closes and no client re-attaches within the grace period.
// Event ids are "<session>.<seq>", so an EventSource that reconnects with
// Last-Event-ID gets the same session back, with what it missed.

// legacyGet opens (or, with Last-Event-ID, re-attaches to) a legacy session.
func (h *Handler) legacyGet(w http.ResponseWriter, r *http.Request, name string, be *served) {
	if !lists(r.Header.Get("Accept"), "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, protocol.CodeInvalidRequest,
			"mcpgate: a GET without Mcp-Session-Id opens a legacy HTTP+SSE session and must send Accept: text/event-stream")
		return
	}
	s, after := h.reattach(r, name)
	if s == nil {
		if s, _ = h.open(w, r, name, be, true); s == nil {
			return
		}
		h.log.Debug("legacy SSE session opened", "session", logID(s.ID), logTarget(name))
	} else {
		s.Begin() // open began a new session itself
	}
	st := s.General()
	if !st.Attach() {
		s.End(time.Now())
		writeError(w, http.StatusConflict, protocol.CodeInvalidRequest, "mcpgate: that session's stream is already open")
		return
	}
	bp := getBuf()
	defer putBuf(bp)
	*bp, _ = sse.AppendEvent(*bp, sse.Event{Event: "endpoint", Data: []byte(h.endpointURL(r, name, s.ID))})
	h.stream(w, r, s, st, nil, after, bp, nil, func(dst []byte, seq uint64) []byte {
		dst = append(dst, "id: "...)
		dst = append(dst, s.ID...)
		dst = append(dst, '.')
		dst = strconv.AppendUint(dst, seq, 10)
		return append(dst, '\n')
	})
	st.Detach()
	s.End(time.Now())
	time.AfterFunc(h.cfg.LegacyGrace, func() {
		if !st.Attached() && h.store.Delete(s.ID) != nil {
			h.log.Debug("legacy SSE session ended", "session", logID(s.ID), logTarget(name))
			h.end(s, "the client's SSE stream closed")
		}
	})
}

// reattach finds the legacy session a Last-Event-ID names, and where to
// resume it.
func (h *Handler) reattach(r *http.Request, name string) (*session.Session, uint64) {
	id, seqText, ok := strings.Cut(r.Header.Get("Last-Event-ID"), ".")
	if !ok {
		return nil, 0
	}
	seq, err := strconv.ParseUint(seqText, 10, 64)
	s := h.store.Lookup(id)
	if err != nil || s == nil || s.Server != name || !s.Legacy() || s.Owner != h.owner(r) {
		return nil, 0 // another principal's session is unknown here: a new one opens
	}
	return s, seq
}

// endpointURL is where a legacy session of target name POSTs: a path on
// this host (its target's own /messages), or, when proxy headers are
// trusted and present, an absolute URL as the client sees the gateway.
// A request that reached the gateway under the host of Config.PublicURL
// came through the proxy that serves that URL, so the path keeps the
// public URL's path (https://mcp.example.com/gw: /gw/servers/NAME/messages):
// the client resolves the event against its own URL, and a path without
// the prefix the proxy serves the gateway under would miss the gateway.
func (h *Handler) endpointURL(r *http.Request, name, id string) string {
	path := messagesPath(r, name) + "?sessionId=" + id
	host := ""
	if h.cfg.TrustProxyHeaders {
		host, _, _ = strings.Cut(r.Header.Get("X-Forwarded-Host"), ",") // the first proxy's view
		host = strings.TrimSpace(host)
	}
	if h.viaPublicURL(host, r.Host) {
		path = h.publicPath + path
	}
	if host == "" {
		return path
	}
	// Built as the resource URLs are (strictly): a forwarded host that is
	// no host name ("a@evil.example", "x/#") makes no URL, and the event
	// names the path alone.
	origin, ok := admission.RequestOrigin(r, true)
	if !ok {
		return path
	}
	return origin + path
}

// viaPublicURL reports whether a request whose host is forwarded (when
// trusted and sent) or else host names the host of Config.PublicURL, whose
// path is not empty.
func (h *Handler) viaPublicURL(forwarded, host string) bool {
	if h.publicPath == "" {
		return false
	}
	if forwarded != "" {
		host = forwarded
	}
	_, public, _ := strings.Cut(h.publicOrigin, "://")
	return admission.RequestHost(host) == admission.RequestHost(public)
}

// legacyPost takes the messages of a legacy session: 202 at once, replies
// on the session's stream. While that stream keeps more unread replies than
// its byte bound, new messages get 503 with Retry-After.
//
// A request refused by a limit (429 or 503 on a /mcp POST) is answered
// 202 here, and its refusal goes on the session's SSE stream as a JSON-RPC
// error with its id, where the client waits for its reply. Clients differ
// on a POST's status: the TypeScript SDK's SSEClientTransport rejects the
// request on a non-2xx POST (and would log the stream's error as a reply
// to an unknown id, so it must get only one of the two); the Python SDK's
// sse_client raises in its POST writer, which then sends nothing more,
// and the request waits for a reply forever; hand-written clients often
// ignore the POST's response altogether. A 202 and the error on the
// stream end the request in all of them, once, and keep the session
// usable. The 202 carries the refusal's Retry-After too, and the error's
// data has it as "retryAfter" (seconds).
//
// The refusals that stay on the POST are those of a request that cannot
// reach the stream: a malformed body, an unknown session, and a stream
// not read (Backlogged: an event there would not be read either).
func (h *Handler) legacyPost(w http.ResponseWriter, r *http.Request, name string) {
	rec, _ := w.(*audit.Exchange) // nil without an audit log (admission.go)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, protocol.CodeInvalidRequest, "mcpgate: method "+r.Method+" not allowed")
		return
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		writeError(w, http.StatusUnsupportedMediaType, protocol.CodeInvalidRequest, "mcpgate: Content-Type must be application/json")
		return
	}
	s := h.store.Lookup(r.URL.Query().Get("sessionId"))
	if s == nil || s.Server != name || !s.Legacy() || s.Owner != h.owner(r) {
		writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, "mcpgate: session not found (its stream closed); open a new one")
		return
	}
	msgs, _, ok := h.readMessages(w, r)
	if !ok {
		return
	}
	// Requests cannot travel as notifications (compat.go).
	if msgs = h.dropIDless(r, msgs, TransportLegacySSE); len(msgs) == 0 {
		// No request left, so no line: not one of a POST whose messages
		// were never read (a nil msgs).
		rec.SetMessages(msgs)
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("Accepted"))
		return
	}
	rec.SetMessages(msgs)
	conn := connOf(s)
	if conn == nil {
		writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, "mcpgate: session not found")
		return
	}
	if s.General().Backlogged() {
		// Replies are never dropped, so a client that does not read its
		// stream (it vanished, or stalls) must not add more: refuse before
		// handling, so nothing is lost and the pile stays bounded.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, protocol.CodeServerError,
			"mcpgate: the session's SSE stream is not read: its unread replies are over sseReplayBytes; read them before sending more")
		return
	}
	rec.Skip()                       // one line per request, when its reply is on the stream
	release, ref := h.check(r, msgs) // admission.go
	if ref != nil {
		h.refuseLegacy(r, name, s.General(), msgs, ref)
		w.Header().Set("Retry-After", limits.RetryAfter(ref.Retry))
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("Accepted"))
		return
	}
	s.Begin()
	// Announced before they are handled, so a draining stream stays open
	// until their replies are out.
	s.General().Expect(countRequests(msgs))
	h.handleLegacy(r, name, conn, s.General(), msgs, release)
	s.End(time.Now())
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte("Accepted"))
}
