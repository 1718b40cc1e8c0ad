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
// as long as it runs, and is recorded as a session of its own meanwhile.
// The front does the HTTP: it reads and checks the POST, writes the answer
// as JSON or SSE, and holds a listen's stream; eras does the rest (what
// the request needs, translating it for a server of the session eras or
// passing it through, input_required and its retries: eras.Parking).

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
	if h.retryElsewhere(w, r, msg) { // stateless_elsewhere.go
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
	var out *eras.Exchange[*session.Session]
	defer func() {
		s.End(time.Now())
		if out == nil || !out.Parked() {
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
	switch h.parking.Route(sc, msg, req) {
	case eras.RouteResume:
		h.resume(w, r, name, msg) // by the same principal only (Unpark)
		return
	case eras.RouteDiscover:
		h.discover(w, r, sc, id)
		return
	case eras.RouteListen:
		h.listen(w, r, s, sc, msg, id) // stateless_listen.go
		return
	}
	st := s.NewStream(1, time.Now())
	st.Attach()
	defer st.Detach()
	origin := eras.Origin[*session.Session]{Session: s, Target: s.Server, Owner: s.Owner, Bind: h.authenticator() != nil, Header: r.Header}
	if req.Method == "tools/list" {
		origin.Observe = func(reply []byte) { h.paramTools.observe(paramKey(s.Server, s.Owner), reply) } // paramheaders.go
	}
	out, prob = h.parking.Serve(r.Context(), sc, msg, req, origin, st)
	if prob != nil {
		writeProblem(w, id, prob)
		return
	}
	h.await(w, r, s, st, out, msg)
}

// await answers the stateless request msg from st. A client that left has
// its request cancelled upstream, even one parked for input.
func (h *Handler) await(w http.ResponseWriter, r *http.Request, s *session.Session, st *session.Stream, out *eras.Exchange[*session.Session], msg *jsonrpc.Message) {
	ans := answers{msgs: []jsonrpc.Message{*msg}, reqs: 1}
	if !h.respond(w, r, s, st, false, &ans) {
		out.Abandon()
	}
}

// resume serves the retry msg, come to target server (a session key), of
// a request answered input_required: on the parked request's session,
// this request's own ends.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, server string, msg *jsonrpc.Message) {
	id := msg.Bytes(msg.ID)
	out, prob := h.parking.Unpark(msg, server, h.owner(r))
	if prob != nil {
		writeProblem(w, id, prob)
		return
	}
	// out is ours now: nobody else can take it (its state opened once).
	s := out.Session()
	s.Begin()
	defer func() {
		s.End(time.Now())
		if !out.Parked() {
			h.parking.End(out, "the request ended")
		}
	}()
	st := s.NewStream(1, time.Now())
	st.Attach()
	defer st.Detach()
	if prob := out.Resume(msg, st); prob != nil {
		writeProblem(w, id, prob)
		return
	}
	h.await(w, r, s, st, out, msg)
}

// release ends the session of a stateless request that is over
// (eras.Parking.Release).
func (h *Handler) release(s *session.Session, reason string) {
	if h.store.Delete(s.ID) != nil {
		h.end(s, reason)
	}
}

// discover answers server/discover from the server's initialize result.
func (h *Handler) discover(w http.ResponseWriter, r *http.Request, sc conn.StatelessConn, id []byte) {
	result, prob := eras.DiscoverResult(r.Context(), sc, protocol.SessionVersions, unservedCapabilities)
	if prob != nil {
		writeProblem(w, id, prob)
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
