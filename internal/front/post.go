package front

import (
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/admission"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

func (h *Handler) post(w http.ResponseWriter, r *http.Request, name string, be *served) {
	rec, _ := w.(*audit.Exchange) // nil without an audit log (admission.go)
	accept := r.Header.Get("Accept")
	if !accepts(accept, "application/json") || !accepts(accept, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, protocol.CodeInvalidRequest, "mcpgate: Accept must list application/json and text/event-stream")
		return
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		writeError(w, http.StatusUnsupportedMediaType, protocol.CodeInvalidRequest, "mcpgate: Content-Type must be application/json")
		return
	}
	msgs, batch, ok := h.readMessages(w, r)
	if !ok {
		return
	}
	rec.SetMessages(msgs)
	stateless := isStatelessPost(r, msgs, batch)
	if !stateless {
		if msgs, ok = h.sessionEraMessages(w, r, msgs, batch); !ok { // compat.go
			return
		}
		rec.SetMessages(msgs) // without the requests dropped
	}
	release, ok := h.admit(w, r, msgs, batch) // admission.go
	if !ok {
		return
	}
	defer release()
	if h.enter(msgs) { // observe.go
		defer h.cfg.Audit.Leave()
	}
	if stateless {
		h.stateless(w, r, name, be, msgs, batch)
		return
	}
	requests := countRequests(msgs)
	if !batch && msgs[0].Kind == jsonrpc.KindRequest && msgs[0].MethodIs(protocol.MethodInitialize) {
		h.initialize(w, r, name, be, &msgs[0])
		return
	}
	s := h.lookup(w, r, name)
	if s == nil {
		return
	}
	if batch && !protocol.AllowsBatches(s.Version()) {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: JSON-RPC batches are not allowed in protocol version "+s.Version())
		return
	}
	conn := connOf(s)
	if conn == nil {
		writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, "mcpgate: session not found")
		return
	}
	if h.answersElsewhere(w, r, s, msgs, batch) { // serverreqs.go
		return
	}
	s.Begin()
	defer func() { s.End(time.Now()) }()
	if requests == 0 {
		for i := range msgs {
			conn.Handle(r.Context(), &msgs[i], nil)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := s.NewStream(requests, time.Now())
	st.Attach()
	defer st.Detach()
	out := h.requestStream(s, st) // serverreqs.go
	for i := range msgs {
		conn.Handle(r.Context(), &msgs[i], out)
	}
	ans := answers{msgs: msgs, reqs: requests}
	if !h.respond(w, r, s, st, batch, &ans) {
		conn.Abandon(out)
	}
}

// countRequests returns how many of msgs are requests (they get replies).
func countRequests(msgs []jsonrpc.Message) int {
	n := 0
	for i := range msgs {
		if msgs[i].Kind == jsonrpc.KindRequest {
			n++
		}
	}
	return n
}

// readMessages reads and parses a POST body: one message or a batch. On
// failure it answers the request itself.
func (h *Handler) readMessages(w http.ResponseWriter, r *http.Request) (msgs []jsonrpc.Message, batch, ok bool) {
	body, err := h.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, protocol.CodeInvalidRequest,
				"mcpgate: request body over the limit of "+strconv.FormatInt(h.cfg.MaxBodyBytes, 10)+" bytes")
			return nil, false, false
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, protocol.CodeInvalidRequest,
				"mcpgate: request body not received within "+h.cfg.BodyReadTimeout.String())
			return nil, false, false
		}
		writeError(w, http.StatusBadRequest, protocol.CodeParseError, "mcpgate: reading request body: "+err.Error())
		return nil, false, false
	}
	parts := [][]byte{body}
	if batch = jsonrpc.IsBatch(body); batch {
		if parts, err = jsonrpc.SplitBatch(body); err != nil {
			writeError(w, http.StatusBadRequest, jsonrpc.Code(err), err.Error())
			return nil, false, false
		}
	}
	msgs = make([]jsonrpc.Message, len(parts))
	for i, p := range parts {
		if msgs[i], err = jsonrpc.Parse(p); err != nil {
			writeError(w, http.StatusBadRequest, jsonrpc.Code(err), err.Error())
			return nil, false, false
		}
	}
	return msgs, batch, true
}

// readBody reads a request body of at most MaxBodyBytes within
// BodyReadTimeout. The buffer grows as bytes arrive: a peer announcing a
// large Content-Length and sending nothing costs almost nothing.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := h.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	// The deadline covers the body only and is lifted after it, so replies
	// streamed for minutes are not cut. (http.Server.ReadTimeout would cut
	// them: it also bounds long-lived handlers.)
	deadline := setReadDeadline(w, time.Now().Add(h.cfg.BodyReadTimeout))
	body := r.Body
	if r.ContentLength < 0 {
		// Of unknown length: cut at the limit. (A body of announced
		// length ends there: net/http sees to it.)
		body = http.MaxBytesReader(w, r.Body, limit)
	}
	b, err := readAll(body, r.ContentLength)
	if err == nil {
		// Read to its end: closed, net/http does not look for more to
		// discard before the reply (an io.CopyN, and its LimitReader, per
		// request).
		r.Body.Close()
	}
	if deadline && err == nil {
		setReadDeadline(w, time.Time{})
	}
	// After a failed read the deadline stays: net/http must not go on
	// reading (discarding) the rest of a stalled body with none, which would
	// keep a slowloris connection open for as long as it trickles.
	return b, err
}

// setReadDeadline sets the read deadline of w's connection, as
// http.ResponseController does, and reports whether it could. Unlike the
// controller, it allocates nothing when w cannot (a ResponseController
// builds a new error each time).
func setReadDeadline(w http.ResponseWriter, t time.Time) bool {
	for {
		switch v := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return v.SetReadDeadline(t) == nil
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return false
		}
	}
}

// initialize creates the session, opens its connection to the server and
// answers the client's initialize. It waits for the reply before writing
// any header: only a successful initialize gets the session's id; after a
// failure the session is gone and the client must not be told its id.
func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, name string, be *served, msg *jsonrpc.Message) {
	s, conn := h.open(w, r, name, be, false)
	if s == nil {
		return
	}
	defer func() { s.End(time.Now()) }() // open began it
	st := s.NewStream(1, time.Now())
	st.Attach()
	defer st.Detach()
	conn.Handle(r.Context(), msg, st)
	var evs []session.Event
	for {
		var done bool
		evs, done, _ = st.Next(evs, seqOf(evs))
		if done || r.Context().Err() != nil {
			break
		}
		select {
		case <-st.Wake():
		case <-r.Context().Done():
		}
	}
	if r.Context().Err() != nil {
		// The client left, perhaps while Backend.Open started its process,
		// and will never learn the session's id: end it now rather than
		// hold a process until the idle timeout.
		if h.store.Delete(s.ID) != nil {
			h.end(s, "the client left during initialize")
		}
		return
	}
	last := seqOf(evs) // before an error of ours (seq 0) is added
	v := conn.Version()
	if v == "" || !st.Complete() {
		if h.store.Delete(s.ID) != nil {
			h.end(s, "initialize failed")
		}
		if !st.Complete() {
			evs = append(evs, session.Event{Final: true, Data: jsonrpc.ErrorResponse(msg.Bytes(msg.ID), protocol.CodeServerError,
				"mcpgate: "+describe(name)+" did not answer initialize: "+closeReason(s))})
		}
	} else {
		s.SetVersion(v)
		if s.Handoff() != nil {
			h.publishHandoff(s) // elsewhere.go
		}
		w.Header().Set("Mcp-Session-Id", s.ID)
		h.established(s, name, transportStreamable, v) // sessionlog.go
	}
	s.Forget(st)
	for _, ev := range evs {
		if !ev.Final && ev.Data != nil {
			// Related messages came first: all of it as one SSE stream, with
			// no priming event (the client did not know its version yet).
			bp := getBuf()
			defer putBuf(bp)
			h.stream(w, r, s, st, evs, last, bp, nil, func(dst []byte, seq uint64) []byte { return appendID(dst, st.ID(), seq) })
			return
		}
	}
	if v == "" && writeRetryable(w, evs) { // initretry.go
		return
	}
	writeJSON(w, evs, false)
}

// open creates a session and its connection to the server, or answers 503
// itself (draining, too many sessions, the server cannot be reached) and
// returns nil. The session it returns is active (Session.Begin): the caller
// ends that activity. It is active from its creation on, so the idle sweeper
// cannot take it while Backend.Open runs (starting a process may take longer
// than the idle timeout).
func (h *Handler) open(w http.ResponseWriter, r *http.Request, name string, be *served, legacy bool) (*session.Session, conn.Conn) {
	if h.draining.Load() {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, protocol.CodeServerError, "mcpgate: the gateway is shutting down")
		return nil, nil
	}
	// Sessions per principal (admission.go).
	counted, ref := admission.From(r.Context()).AdmitSession()
	if ref != nil {
		refuse(w, ref, nil)
		return nil, nil
	}
	s, err := h.create(name, h.owner(r), legacy, time.Now())
	if counted != nil {
		counted(s) // nil on error
	}
	if err != nil {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, protocol.CodeServerError, errTooMany.Error())
		return nil, nil
	}
	s.Begin()
	if legacy {
		s.SetLegacy()
	}
	conn, err := be.Open(h.withStateUpdates(h.withHandoff(r.Context(), s), s), h.generalStream(s)) // elsewhere.go, statesync.go, serverreqs.go
	if err != nil {
		h.store.Delete(s.ID)
		s.Close("the server could not be opened")
		// A client retrying against a server at its limit must not cost a
		// log line per attempt.
		if ok, held := h.openFailures.Allow(time.Now()); ok {
			h.log.Error("opening session failed", logTarget(name), "err", err, "suppressed", held)
		}
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) {
			w.Header().Set("Retry-After", limits.RetryAfter(ra.RetryAfter()))
		}
		status, text := openRefusal(name, err)
		writeError(w, status, protocol.CodeServerError, text)
		return nil, nil
	}
	s.SetValue(conn)
	// Whatever happened while Open ran (elsewhere.go), this connection
	// must be closed, once (end takes it).
	switch reason := h.settled(s, name, be); reason {
	case "":
	case reasonReconfigured:
		h.store.Delete(s.ID)
		h.end(s, reason)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, protocol.CodeServerError, "mcpgate: "+describe(name)+" was reconfigured while the session opened; retry")
		return nil, nil
	default:
		h.store.Delete(s.ID)
		h.end(s, reason)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, protocol.CodeServerError, "mcpgate: the gateway is shutting down")
		return nil, nil
	}
	if legacy {
		h.established(s, name, transportSSE, "") // sessionlog.go
	}
	return s, conn
}

func isJSON(contentType string) bool {
	return strings.EqualFold(mediaType(contentType), "application/json")
}

// openRefusal is the status and message of a request whose session (or
// stateless connection) could not be opened: 503 and the server
// "unavailable", unless the error says otherwise with an HTTPStatus()
// int method (a principal without the upstream credential it needs:
// 403, and the error as it is).
func openRefusal(name string, err error) (int, string) {
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatus(), err.Error()
	}
	return http.StatusServiceUnavailable, "mcpgate: " + describe(name) + " unavailable: " + strings.TrimPrefix(err.Error(), "mcpgate: ")
}
