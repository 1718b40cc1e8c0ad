package front

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file holds what the front accepts of real clients' quirks, and what
// it drops that no client may send, each counted (CompatCounts, for the
// metrics) and logged without flooding.
//
// Accepted, where a request has one reading only:
//   - a 2026-07-28 body under an older MCP-Protocol-Version (claude.ai's
//     connectors, anthropics/claude-code#93290): served as 2026-07-28
//     (eras.Check decides, stateless.go counts);
//   - on a session, a header naming another version the gateway supports
//     (a client that sends its newest version everywhere): read as the
//     session's negotiated version, which is what the session speaks;
//   - one version repeated ("2025-11-25, 2025-11-25", or two lines: Claude
//     Code 2.1 with the header among its static headers): that version;
//   - notifications/initialized without Mcp-Session-Id (claude.ai,
//     anthropics/claude-ai-mcp#99): 202, and dropped, since no session can
//     be told it. (A session-mode server whose SDK waits for it before
//     serving requests then answers the session's requests with its own
//     error, as it would for a client that never sent it.)
//
// Refused as before: different values in the header, versions the gateway
// does not serve, and everything eras.Check refuses.
//
// Dropped: a message without an id whose method is a request's (anything
// but notifications/*). It cannot be answered, so it is no request; a
// server that acted on it would do so outside the policy, which sees
// requests only. It is counted and never forwarded, on every transport.

// Kinds of a version header the front accepted though it did not match
// (the kind label of mcpgate_version_header_mismatch_total).
const (
	MismatchBodyNewer    = "body_newer"    // a 2026-07-28 body under an older header
	MismatchSessionOther = "session_other" // on a session, another supported version
	MismatchRepeated     = "repeated"      // one version given more than once
)

var mismatchKinds = [...]string{MismatchBodyNewer, MismatchSessionOther, MismatchRepeated}

// Transports a message is dropped on (the transport label of
// mcpgate_requests_without_id_dropped_total).
const (
	TransportStreamable = "streamable" // a Streamable HTTP POST of one message
	TransportBatch      = "batch"      // inside a 2025-03-26 batch
	TransportLegacySSE  = "legacy_sse" // a legacy session's /messages POST
	TransportStateless  = "stateless"  // a 2026-07-28 request
)

var dropTransports = [...]string{TransportStreamable, TransportBatch, TransportLegacySSE, TransportStateless}

// maxLoggedClients bounds the clients (kind and User-Agent) whose quirk is
// logged once: past it, new ones are counted only.
const maxLoggedClients = 256

// compat is the Handler's counters and log state of this file.
type compat struct {
	mismatch    [len(mismatchKinds)]atomic.Uint64
	dropped     [len(dropTransports)]atomic.Uint64
	initialized atomic.Uint64 // notifications/initialized without a session

	mu     sync.Mutex
	logged map[string]bool // guarded by mu: kind + "\x00" + User-Agent, logged already
	full   bool            // guarded by mu: the bound was reached (and said so)
	lines  limits.LogLimit // the lines of dropped and initialized messages
}

// CompatCounts are the counters of this file, each monotonic.
type CompatCounts struct {
	VersionHeaderMismatch     map[string]uint64 // by kind (Mismatch*)
	RequestsWithoutID         map[string]uint64 // dropped, by transport (Transport*)
	InitializedWithoutSession uint64            // notifications/initialized without Mcp-Session-Id, answered 202
}

// CompatCounts returns the counts of client quirks accepted and of
// requests without an id dropped. Every label is present, zeros included.
func (h *Handler) CompatCounts() CompatCounts {
	c := CompatCounts{
		VersionHeaderMismatch:     make(map[string]uint64, len(mismatchKinds)),
		RequestsWithoutID:         make(map[string]uint64, len(dropTransports)),
		InitializedWithoutSession: h.compat.initialized.Load(),
	}
	for i, k := range mismatchKinds {
		c.VersionHeaderMismatch[k] = h.compat.mismatch[i].Load()
	}
	for i, t := range dropTransports {
		c.RequestsWithoutID[t] = h.compat.dropped[i].Load()
	}
	return c
}

// accepted counts a version header of kind accepted, and logs it the
// first time this kind comes from this client (by User-Agent).
func (h *Handler) accepted(r *http.Request, kind, header, version string) {
	h.compat.mismatch[slices.Index(mismatchKinds[:], kind)].Add(1)
	ua := r.Header.Get("User-Agent")
	if len(ua) > 128 {
		ua = ua[:128]
	}
	key := kind + "\x00" + ua
	c := &h.compat
	c.mu.Lock()
	first, full := !c.logged[key], false
	if first {
		if len(c.logged) >= maxLoggedClients {
			first, full = false, !c.full
			c.full = true
		} else {
			if c.logged == nil {
				c.logged = make(map[string]bool)
			}
			c.logged[key] = true
		}
	}
	c.mu.Unlock()
	switch {
	case first:
		h.log.Info("client's MCP-Protocol-Version accepted though it does not match", "kind", kind,
			"user_agent", strconv.Quote(ua), "header", strconv.Quote(clipHeader(header)), "served_as", version)
	case full:
		h.log.Info("client quirks of more clients are counted, not logged", "clients", maxLoggedClients)
	}
}

// maxClip is the most of a header value a message or log line shows.
const maxClip = 64

// clipHeader shortens a header value for a log line.
func clipHeader(v string) string {
	if len(v) > maxClip {
		return v[:maxClip]
	}
	return v
}

// checkVersionHeader checks the MCP-Protocol-Version header of a request
// of the session eras, answering 400 itself when it is refused: values that
// differ, or a version the gateway does not serve. onSession admits every
// version the gateway serves, the stateless revision's too (read as the
// session's: see lookup); otherwise only the session eras'. A repeated
// value is counted here; another version than the session's in lookup.
func (h *Handler) checkVersionHeader(w http.ResponseWriter, r *http.Request, onSession bool) bool {
	v, repeated, ok := eras.HeaderVersion(r.Header)
	if !ok {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: MCP-Protocol-Version given with different values: "+
			strconv.Quote(clipHeader(headerLine(r.Header))))
		return false
	}
	if v != "" && !protocol.IsSessionVersion(v) && !(onSession && protocol.IsStatelessVersion(v)) {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: unsupported MCP-Protocol-Version "+strconv.Quote(clipHeader(v)))
		return false
	}
	if repeated {
		h.accepted(r, MismatchRepeated, headerLine(r.Header), v)
	}
	return true
}

// sessionVersion counts a request on session s whose header names another
// version than the session's: front admitted it (a version the gateway
// serves), and the session speaks its negotiated one all the same.
func (h *Handler) sessionVersion(r *http.Request, s *session.Session) {
	if v := headerVersion(r.Header); v != "" && s.Version() != "" && v != s.Version() {
		h.accepted(r, MismatchSessionOther, v, s.Version())
	}
}

// headerLine is the MCP-Protocol-Version header's lines joined, clipped
// for messages: only what a message shows is joined, so a header of tens of
// thousands of lines (a megabyte of them fits net/http's limit) costs no
// more than its first ones. (Joined whole, one at a time, it cost seconds
// of CPU a request.)
func headerLine(h http.Header) string {
	vs := h["Mcp-Protocol-Version"]
	if len(vs) == 1 {
		return clipHeader(vs[0])
	}
	var b strings.Builder
	for i, v := range vs {
		if b.Len() >= maxClip {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(clipHeader(v))
	}
	return clipHeader(b.String())
}

// headerVersion is the one version MCP-Protocol-Version names, or the
// header as headerLine shows it when it names several (which the checks
// refuse; no version is that long or has a comma).
func headerVersion(h http.Header) string {
	if v, _, ok := eras.HeaderVersion(h); ok {
		return v
	}
	return headerLine(h)
}

// sessionEraMessages applies this file's rules to the messages of a POST
// of the session eras (not a stateless one), before the audit, the limits
// and the session see them: the version header of a POST without a
// session (front checked the others), requests without an id dropped, and
// notifications/initialized without a session accepted. It returns the
// messages left, or false when it answered the POST itself.
func (h *Handler) sessionEraMessages(w http.ResponseWriter, r *http.Request, msgs []jsonrpc.Message, batch bool) ([]jsonrpc.Message, bool) {
	noSession := r.Header.Get("Mcp-Session-Id") == ""
	if noSession && !h.checkVersionHeader(w, r, false) {
		return nil, false
	}
	transport := TransportStreamable
	if batch {
		transport = TransportBatch
	}
	if msgs = h.dropIDless(r, msgs, transport); len(msgs) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return nil, false
	}
	if noSession && !batch && msgs[0].Kind == jsonrpc.KindNotification && msgs[0].MethodIs(protocol.NotificationInitialized) {
		h.initializedWithoutSession(w, r)
		return nil, false
	}
	return msgs, true
}

// isRequestMethod reports whether a method is a request's: every method but
// notifications/*.
func isRequestMethod(msg *jsonrpc.Message) bool {
	const prefix = "notifications/"
	m := msg.MethodName()
	return len(m) < len(prefix) || m[:len(prefix)] != prefix
}

// dropIDless removes from msgs, in place, the messages without an id
// whose method is a request's, counting and logging them as dropped on
// transport. The others keep their order.
func (h *Handler) dropIDless(r *http.Request, msgs []jsonrpc.Message, transport string) []jsonrpc.Message {
	out := msgs[:0]
	for i := range msgs {
		if msgs[i].Kind == jsonrpc.KindNotification && isRequestMethod(&msgs[i]) {
			h.droppedIDless(r, &msgs[i], transport)
			continue
		}
		out = append(out, msgs[i])
	}
	return out
}

// droppedIDless counts and logs (rate-limited) a request method sent
// without an id, dropped on transport.
func (h *Handler) droppedIDless(r *http.Request, msg *jsonrpc.Message, transport string) {
	h.compat.dropped[slices.Index(dropTransports[:], transport)].Add(1)
	if ok, held := h.compat.lines.Allow(time.Now()); ok {
		h.log.Warn("request without id dropped: it cannot be answered and is not forwarded", "method", clipHeader(msg.MethodName()),
			"transport", transport, "user_agent", strconv.Quote(clipHeader(r.Header.Get("User-Agent"))), "suppressed", held)
	}
}

// initializedWithoutSession answers a POST of notifications/initialized
// without Mcp-Session-Id: 202, counted.
func (h *Handler) initializedWithoutSession(w http.ResponseWriter, r *http.Request) {
	h.compat.initialized.Add(1)
	if ok, held := h.compat.lines.Allow(time.Now()); ok {
		h.log.Debug("notifications/initialized without Mcp-Session-Id accepted", "user_agent", strconv.Quote(clipHeader(r.Header.Get("User-Agent"))), "suppressed", held)
	}
	w.WriteHeader(http.StatusAccepted)
}
