package front

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file routes a client's answer to a server's request back to the
// replica that asked it. A portable session's messages travel through
// whichever replica a request landed on; a request the server sends the
// client (sampling, elicitation, roots/list) is known, under the id the
// connection gave it, only to the connection of the replica that relayed
// it. With the cluster on, such a request reaches the client with an id
// sealed by the key ring for its session, naming that replica and the
// connection's id; the client's answer, wherever it lands, is unsealed
// there, or forwarded to that replica (one hop), and reaches the
// connection under the connection's own id.

// serverReqPrefix starts the id of every server request a replica sealed
// (a JSON string): "mcpgate-sr." then the token.
const serverReqPrefix = "mcpgate-sr."

// serverReqTTL bounds how long a sealed server-request id opens: longer
// than any client takes to answer.
const serverReqTTL = time.Hour

func serverReqPurpose(sid string) string { return "mcpgate server request\x00" + sid }

// relayStream is a session stream of a cluster's session as its
// connection writes to it: a server request sent on it gets a sealed id
// (sealServerRequest) once the session is portable; the rest, replies
// above all, pass as they are.
type relayStream struct {
	conn.Stream
	h *Handler
	s *session.Session
}

// relay returns the stream the session's connection is given for out:
// out itself without a cluster.
func (h *Handler) relay(s *session.Session, out conn.Stream) conn.Stream {
	if h.cfg.Cluster == nil {
		return out
	}
	return &relayStream{Stream: out, h: h, s: s}
}

func (rs *relayStream) Send(msg []byte) {
	if rs.s.Handoff() != nil {
		msg = rs.h.sealServerRequest(rs.s.ID, msg)
	}
	rs.Stream.Send(msg)
}

// sealServerRequest returns msg with its id sealed, when it is a request:
// the plaintext is this replica's instance and address and the id as the
// connection gave it.
func (h *Handler) sealServerRequest(sid string, msg []byte) []byte {
	if !bytes.Contains(msg, []byte(`"method"`)) || !bytes.Contains(msg, []byte(`"id"`)) {
		return msg // a notification, for sure: no parse
	}
	m, err := jsonrpc.Parse(msg)
	if err != nil || m.Kind != jsonrpc.KindRequest {
		return msg
	}
	cl := h.cfg.Cluster
	c := claim{instance: cl.Instance(), advertise: cl.Advertise()}
	plain := append(c.marshal(), m.Bytes(m.ID)...)
	id := `"` + serverReqPrefix + h.cfg.Seal.Seal(serverReqPurpose(sid), plain, serverReqTTL) + `"`
	return jsonrpc.Splice(nil, msg, jsonrpc.Edit{Span: m.ID, Value: []byte(id)})
}

// openServerReqID returns the replica that relayed the server request
// whose sealed id is id (a JSON string), and the id the connection gave
// it; ok is false for any other id.
func (h *Handler) openServerReqID(sid string, id []byte) (c claim, orig []byte, ok bool) {
	token, found := bytes.CutPrefix(id, []byte(`"`+serverReqPrefix))
	if !found || len(token) < 2 || token[len(token)-1] != '"' {
		return c, nil, false
	}
	plain, err := h.cfg.Seal.Open(serverReqPurpose(sid), string(token[:len(token)-1]))
	if err != nil || len(plain) < 2+8+8+2 {
		return c, nil, false
	}
	// The claim's marshal, then the id: split where the claim ends.
	n := 2 + 8 + 8
	if len(plain) < n+1 || len(plain) < n+1+int(plain[n]) {
		return c, nil, false
	}
	n += 1 + int(plain[n])
	if len(plain) < n+1 || len(plain) < n+1+int(plain[n]) {
		return c, nil, false
	}
	n += 1 + int(plain[n])
	if c, err = parseClaim(plain[:n]); err != nil || n == len(plain) {
		return c, nil, false
	}
	return c, plain[n:], true
}

// routeAnswers routes the clients' answers among msgs to server requests a
// replica sealed: those of this replica get their connection's ids back,
// in place; when every answer is for one other replica, and msgs hold no
// request, the POST goes there (true: it was answered). Answers for a
// replica this POST cannot reach are dropped (their request went with
// their replica), and so are those whose id does not open.
func (h *Handler) routeAnswers(w http.ResponseWriter, r *http.Request, s *session.Session, msgs []jsonrpc.Message) ([]jsonrpc.Message, bool) {
	if h.cfg.Cluster == nil {
		return msgs, false
	}
	var elsewhere string
	kept := msgs[:0:0]
	mixed := false
	for i := range msgs {
		m := &msgs[i]
		if m.Kind != jsonrpc.KindResponse || !bytes.HasPrefix(m.Bytes(m.ID), []byte(`"`+serverReqPrefix)) {
			kept = append(kept, *m)
			continue
		}
		c, orig, ok := h.openServerReqID(s.ID, m.Bytes(m.ID))
		if !ok {
			continue // not ours to read: nobody could route it
		}
		if c.instance != h.cfg.Cluster.Instance() {
			if elsewhere != "" && elsewhere != c.advertise {
				mixed = true
			}
			elsewhere = c.advertise
			continue
		}
		raw := jsonrpc.Splice(nil, m.Raw, jsonrpc.Edit{Span: m.ID, Value: orig})
		back, err := jsonrpc.Parse(raw)
		if err != nil {
			continue
		}
		kept = append(kept, back)
	}
	if elsewhere == "" || mixed || r.Header.Get(hopHeader) != "" || countRequests(msgs) > 0 || len(kept) > 0 {
		return kept, false
	}
	// Every message is an answer for one other replica: send the POST
	// there, as the client wrote it.
	body := make([]byte, 0, 256)
	if len(msgs) > 1 {
		body = append(body, '[')
	}
	for i := range msgs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, msgs[i].Raw...)
	}
	if len(msgs) > 1 {
		body = append(body, ']')
	}
	fr := r.Clone(r.Context())
	fr.Body = io.NopCloser(bytes.NewReader(body))
	fr.ContentLength = int64(len(body))
	if h.forward(w, fr, elsewhere) {
		return nil, true
	}
	return kept, false
}
