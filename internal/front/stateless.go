package front

import (
	"net/http"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file serves the stateless revision (2026-07-28) on the same
// endpoints as the session eras: a POST without a session id whose request
// names a modern version in params._meta (or in MCP-Protocol-Version) is
// one self-contained request. It gets its own connection to the server for
// as long as it runs, in front of the server's one initialized (session-era)
// process: the request goes up without the revision's _meta keys, its
// result comes back with resultType (and ttlMs and cacheScope where the
// revision asks for them).

// unservedCapabilities are server capabilities a stateless client cannot
// use through the gateway yet: tasks and experimental ones as in shared
// mode, and logging (per-request levels are not forwarded to a shared
// process).
var unservedCapabilities = []string{"tasks", "experimental", "logging"}

// isStatelessPost reports whether a POST is of the stateless revision.
func isStatelessPost(r *http.Request, msgs []jsonrpc.Message, batch bool) bool {
	if r.Header.Get("Mcp-Session-Id") != "" || len(msgs) == 0 {
		return false
	}
	// The header's one version, repeated or not (compat.go).
	if batch {
		// A batch is never modern, but one whose header says so must not
		// fall through to the session path.
		return eras.IsModern(headerVersion(r.Header), nil)
	}
	return eras.IsModern(headerVersion(r.Header), &msgs[0])
}

// stateless answers one request of the stateless revision.
func (h *Handler) stateless(w http.ResponseWriter, r *http.Request, name string, be conn.Backend, msgs []jsonrpc.Message, batch bool) {
	if batch {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: JSON-RPC batches are not allowed in protocol version "+protocol.StatelessVersion)
		return
	}
	msg := &msgs[0]
	id := msg.Bytes(msg.ID)
	req, prob := eras.Check(r.Header, msg)
	if prob != nil {
		writeProblem(w, id, prob)
		return
	}
	if msg.Kind != jsonrpc.KindRequest {
		// The revision defines no client notification over HTTP (a
		// request is cancelled by closing its stream): accepted, dropped.
		// A request method without an id is counted (compat.go).
		if isRequestMethod(msg) {
			h.droppedIDless(r, msg, TransportStateless)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	// What Claude's clients send, accepted by Check (compat.go).
	if req.OlderHeader != "" {
		h.accepted(r, MismatchBodyNewer, req.OlderHeader, req.Version)
	}
	if req.RepeatedHeader {
		h.accepted(r, MismatchRepeated, headerLine(r.Header), req.Version)
	}
	if prob := h.checkParamHeaders(r.Context(), name, be, r.Header, msg, req); prob != nil {
		writeProblem(w, id, prob) // paramheaders.go
		return
	}
	if !be.ServesStateless() {
		writeErrorID(w, http.StatusBadRequest, id, protocol.CodeUnsupportedVersion,
			"mcpgate: "+describe(name)+" serves sessions only, no requests of protocol version "+protocol.StatelessVersion+"; initialize a session",
			unsupportedData(req.Version))
		return
	}
	if h.draining.Load() {
		w.Header().Set("Retry-After", "5")
		writeErrorID(w, http.StatusServiceUnavailable, id, protocol.CodeServerError, "mcpgate: the gateway is shutting down", nil)
		return
	}
	// The request is recorded as a session of its own for as long as it
	// runs, so that shutdown and the session limit see it like any other.
	s, err := h.store.Create(name, h.owner(r), time.Now())
	if err != nil {
		w.Header().Set("Retry-After", "5")
		writeErrorID(w, http.StatusServiceUnavailable, id, protocol.CodeServerError, errTooMany.Error(), nil)
		return
	}
	s.Begin()
	s.SetVersion(req.Version)
	var out *modernStream
	defer func() {
		s.End(time.Now())
		if out == nil || !out.isParked() {
			if h.store.Delete(s.ID) != nil {
				h.end(s, "the request ended")
			}
		}
	}()
	sc, err := be.OpenStateless(r.Context(), s.General(), req.Version, req.Capabilities)
	if err != nil {
		status, text := openRefusal(name, err)
		writeErrorID(w, status, id, protocol.CodeServerError, text, nil)
		return
	}
	s.SetValue(sc.Conn)
	if h.draining.Load() || h.store.Lookup(s.ID) != s {
		writeErrorID(w, http.StatusServiceUnavailable, id, protocol.CodeServerError, "mcpgate: the gateway is shutting down", nil)
		return
	}
	if sc.Passthrough() {
		h.forward(w, r, s, sc, msg, req)
		return
	}
	if protocol.AllowsInputRequired(req.Method) && isRetry(msg) && h.sealedRetry(msg) {
		// The retry of a request that got input_required goes on where
		// that request was parked (this request's own session ends).
		h.resume(w, r, name, msg) // by the same principal only (unpark)
		return
	}
	if req.Method == protocol.MethodServerDiscover {
		h.discover(w, r, sc, id)
		return
	}
	if req.Method == protocol.MethodSubscriptionsListen {
		h.listen(w, r, s, sc, msg, id)
		return
	}
	up, err := jsonrpc.Parse(eras.ToSessionEra(nil, msg))
	if err != nil { // cannot happen: ToSessionEra keeps a valid message valid
		writeErrorID(w, http.StatusInternalServerError, id, protocol.CodeInternalError, "mcpgate: "+err.Error(), nil)
		return
	}
	st := s.NewStream(1, time.Now())
	st.Attach()
	defer st.Detach()
	out = newModernStream(h, s, sc, st, msg, req)
	sc.Handle(r.Context(), &up, out)
	h.await(w, r, s, st, out, msg)
}

// forward serves a request on the connection of a server that speaks the
// stateless revision itself: as it came (ids rewritten by the connection),
// its answers as they come.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, s *session.Session, sc conn.StatelessConn, msg *jsonrpc.Message, req eras.Request) {
	st := s.NewStream(1, time.Now())
	st.Attach()
	defer st.Detach()
	out := &modernStream{h: h, s: s, conn: sc, st: st, method: req.Method, pass: true}
	if h.bindsPassState() {
		// The server's requestState is bound to the principal
		// (passstate.go).
		owner := h.owner(r)
		bound, ok := h.unsealRetry(msg, s.Server, owner)
		if !ok {
			writeErrorID(w, http.StatusBadRequest, msg.Bytes(msg.ID), protocol.CodeInvalidParams, errBadState.Error(), nil)
			return
		}
		msg, out.sealOwner, out.seal = bound, owner, true
	}
	sc.Handle(conn.WithRequestHeader(r.Context(), r.Header), msg, out)
	h.await(w, r, s, st, out, msg)
}

// await answers the stateless request msg from st. A client that left has
// its request cancelled upstream, even one parked for input.
func (h *Handler) await(w http.ResponseWriter, r *http.Request, s *session.Session, st *session.Stream, out *modernStream, msg *jsonrpc.Message) {
	ans := answers{msgs: []jsonrpc.Message{*msg}, reqs: 1}
	if !h.respond(w, r, s, st, false, &ans) {
		h.unparkStream(out)
		out.conn.Abandon(out)
	}
}

// discover answers server/discover from the server's initialize result.
func (h *Handler) discover(w http.ResponseWriter, r *http.Request, conn conn.StatelessConn, id []byte) {
	init, err := conn.ServerInit(r.Context())
	if err != nil {
		writeErrorID(w, http.StatusServiceUnavailable, id, protocol.CodeServerError, err.Error(), nil)
		return
	}
	result, err := eras.Discover(init, protocol.SessionVersions, unservedCapabilities)
	if err != nil {
		writeErrorID(w, http.StatusBadGateway, id, protocol.CodeInternalError, "mcpgate: the server's initialize result: "+err.Error(), nil)
		return
	}
	writeBody(w, jsonrpc.Response(id, result))
}

// writeStatelessJSON writes the reply of a stateless request as one JSON
// body, with the HTTP status the revision gives its error: 404 for a
// method the server does not have, 400 for a request it refused as
// malformed (invalid params, a header mismatch, a capability the request
// did not declare, an unsupported version).
func writeStatelessJSON(w http.ResponseWriter, evs []session.Event) {
	var reply []byte
	for _, ev := range evs {
		if ev.Final && ev.Data != nil {
			reply = ev.Data
		}
	}
	if reply == nil {
		writeJSON(w, evs, false)
		return
	}
	if status := errorStatus(reply); status != http.StatusOK {
		w.Header()["Content-Type"] = jsonContentType
		w.WriteHeader(status)
		_, _ = w.Write(reply)
		return
	}
	writeBody(w, reply)
}

// errorStatus is the HTTP status of a stateless request's reply.
func errorStatus(reply []byte) int {
	m, err := jsonrpc.Parse(reply)
	if err != nil || !m.IsError {
		return http.StatusOK
	}
	switch eras.ErrorCode(&m) {
	case protocol.CodeMethodNotFound:
		return http.StatusNotFound
	case protocol.CodeInvalidParams, protocol.CodeHeaderMismatch, protocol.CodeMissingCapability, protocol.CodeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// writeProblem answers a refused stateless request.
func writeProblem(w http.ResponseWriter, id []byte, p *eras.Problem) {
	writeErrorID(w, p.Status, id, p.Code, p.Message, p.Data)
}

// writeErrorID answers with a JSON-RPC error for request id (the
// revision asks for the id on every error), with data if not nil.
func writeErrorID(w http.ResponseWriter, status int, id []byte, code int, msg string, data []byte) {
	if len(id) == 0 {
		id = []byte("null")
	}
	body := (&eras.Problem{Code: code, Message: msg, Data: data}).AppendResponse(nil, id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// unsupportedData is the data of an unsupported-version error.
func unsupportedData(requested string) []byte {
	b := []byte(`{"supported":[`)
	for i, v := range protocol.SessionVersions {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, v)
	}
	b = append(b, `],"requested":`...)
	b = strconv.AppendQuote(b, requested)
	return append(b, '}')
}
