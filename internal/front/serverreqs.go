package front

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file routes a client's answers to server requests of a portable
// session to the replica that asked. A portable session is served by
// whichever replica a request lands on, but a server request (sampling,
// elicitation, roots; the reverse bridge's input rounds) waits for its
// answer in the memory of the replica that sent it, and the POST carrying
// the answer may land on another. So, with a cluster, the id of every
// server request sent on a portable session's request streams is sealed
// by the key ring with the sending replica's place and the server's own id
// (a JSON string the client gives back as it came); a replica receiving
// an answer opens its id: its own, the server's id goes back in, byte for
// byte; another's, the POST is forwarded there (forward.go), one hop.
//
// Server requests on a session's general stream (those tied to no client
// request) are sealed the same way (generalStream).

// serverRequestPurpose is what a server request's id is sealed for; the
// session id follows it, so an id answers in its own session only.
const serverRequestPurpose = "mcpgate server request\x00"

// serverRequestTTL bounds a sealed server request id: far beyond any
// request's timeout, which ends the request it belongs to first.
const serverRequestTTL = time.Hour

// sealsServerRequests reports whether session s's server request ids
// are sealed: a portable session of a cluster (whose place fits the
// length byte of the sealed id).
func (h *Handler) sealsServerRequests(s *session.Session) bool {
	return h.cfg.Cluster != nil && s.Handoff() != nil && len(h.parking.Place) <= 255
}

// sealedRequests is the Stream a portable session's request is handled
// with: server requests sent on it get sealed ids; the rest passes as it
// came.
type sealedRequests struct {
	conn.Stream
	h   *Handler
	sid string
}

func (s *sealedRequests) Send(msg []byte) {
	s.Stream.Send(s.h.sealServerRequest(s.sid, msg))
}

// sealServerRequest returns msg with its id sealed when it is a request
// (from the server, to the client of session sid); msg itself otherwise.
func (h *Handler) sealServerRequest(sid string, msg []byte) []byte {
	if !bytes.Contains(msg, []byte(`"id"`)) {
		return msg // a notification (progress, a log line): no parse
	}
	m, err := jsonrpc.Parse(msg)
	if err != nil || m.Kind != jsonrpc.KindRequest {
		return msg
	}
	place := h.parking.Place // placeOf the cluster (handler.go)
	id := m.Bytes(m.ID)
	plain := make([]byte, 0, 1+len(place)+len(id))
	plain = append(plain, byte(len(place)))
	plain = append(plain, place...)
	plain = append(plain, id...)
	token := h.cfg.Seal.Seal(serverRequestPurpose+sid, plain, serverRequestTTL)
	return jsonrpc.Splice(nil, msg, jsonrpc.Edit{Span: m.ID, Value: strconv.AppendQuote(nil, token)})
}

// openServerRequestID returns the place and the server's own id sealed
// in id (raw JSON) for session sid; ok false when id is no sealed id of
// this cluster's (the client's own, forged, or from before).
func (h *Handler) openServerRequestID(sid string, id []byte) (place, orig []byte, ok bool) {
	if len(id) < 2 || id[0] != '"' {
		return nil, nil, false
	}
	token, err := strconv.Unquote(string(id))
	if err != nil {
		return nil, nil, false
	}
	plain, err := h.cfg.Seal.Open(serverRequestPurpose+sid, token)
	if err != nil || len(plain) < 1 || len(plain) <= 1+int(plain[0]) {
		return nil, nil, false
	}
	n := int(plain[0])
	return plain[1 : 1+n], plain[1+n:], true
}

// requestStream returns the Stream session s's requests are handled
// with: st, or st sealing server request ids (a portable session of a
// cluster). The caller gives the same Stream to Abandon.
func (h *Handler) requestStream(s *session.Session, st *session.Stream) conn.Stream {
	if !h.sealsServerRequests(s) {
		return st
	}
	return &sealedRequests{Stream: st, h: h, sid: s.ID}
}

// answersElsewhere handles the client's answers to server requests
// among msgs (a POST of session s): when one answers another replica's
// request, the whole POST goes there and it reports true if that replica
// answered r; otherwise the answers to this replica's requests get the
// server's ids back, in place in msgs.
func (h *Handler) answersElsewhere(w http.ResponseWriter, r *http.Request, s *session.Session, msgs []jsonrpc.Message, batch bool) bool {
	if !h.sealsServerRequests(s) {
		return false
	}
	here := h.parking.Place
	for i := range msgs {
		m := &msgs[i]
		if m.Kind != jsonrpc.KindResponse {
			continue
		}
		place, _, ok := h.openServerRequestID(s.ID, m.Bytes(m.ID))
		// A forwarded POST is served here whatever it holds: one hop.
		if ok && !bytes.Equal(place, here) && r.Header.Get(hopHeader) == "" {
			if h.forwardAnswers(w, r, place, msgs, batch) {
				return true
			}
			break // that replica is gone, and its request with it
		}
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Kind != jsonrpc.KindResponse {
			continue
		}
		if place, orig, ok := h.openServerRequestID(s.ID, m.Bytes(m.ID)); ok && bytes.Equal(place, here) {
			if parsed, err := jsonrpc.Parse(jsonrpc.Splice(nil, m.Raw, jsonrpc.Edit{Span: m.ID, Value: orig})); err == nil {
				*m = parsed
			}
		}
	}
	return false
}

// forwardAnswers forwards r, whose body was msgs, to the replica at
// place, and reports whether that replica answered it.
func (h *Handler) forwardAnswers(w http.ResponseWriter, r *http.Request, place []byte, msgs []jsonrpc.Message, batch bool) bool {
	instance, advertise, ok := parsePlace(place) // stateless_elsewhere.go
	if !ok || instance == h.cfg.Cluster.Instance() {
		return false
	}
	var body []byte
	if batch {
		body = append(body, '[')
	}
	for i := range msgs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, msgs[i].Raw...)
	}
	if batch {
		body = append(body, ']')
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return h.forwardToOwner(w, r, instance, advertise) // forward.go
}

// generalStream returns the Stream session s's connection is given for
// the messages tied to no client request: with a cluster, server requests
// on it get sealed ids too, once the session proves portable (its
// connection hands off a state during Open, after this stream was made).
func (h *Handler) generalStream(s *session.Session) conn.Stream {
	if h.cfg.Cluster == nil {
		return s.General()
	}
	return &sealedGeneral{Stream: s.General(), h: h, s: s}
}

// sealedGeneral is a session's general stream sealing the ids of the
// server requests sent on it while the session is portable.
type sealedGeneral struct {
	conn.Stream
	h *Handler
	s *session.Session
}

func (g *sealedGeneral) Send(msg []byte) {
	if g.h.sealsServerRequests(g.s) {
		msg = g.h.sealServerRequest(g.s.ID, msg)
	}
	g.Stream.Send(msg)
}
