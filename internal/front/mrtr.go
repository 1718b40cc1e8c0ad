package front

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file bridges the stateless revision's multi round-trip requests
// (MRTR) to an initialized server's server-to-client requests. When the
// server asks (sampling/createMessage, elicitation/create, roots/list)
// while it serves a client's tools/call, prompts/get or resources/read, the
// client's request is answered input_required: the server's request under
// a key in inputRequests, and a requestState sealed by the gateway. The
// upstream request stays parked, its connection open. The client's retry
// (a new id, the same request plus inputResponses and the requestState)
// opens the state, answers the server's requests with the responses, and
// waits for the server's result, which is delivered as the retry's
// answer; a server that asks again gets another round.
//
// A requestState is sealed by the key ring (Config.Seal) until the
// request's deadline: it names the parked request (random, single use: a
// request has one valid state at a time) and holds a digest of the request
// (method and params without inputResponses, requestState and _meta), so
// it cannot be forged, altered, replayed or used for another request. A
// request is parked for InputWait in all, over at most maxInputRounds
// rounds: then it is cancelled upstream, so no client holds a shared
// server's attention (its requests to clients) for longer.

// maxInputRounds bounds the input_required answers one request gets.
const maxInputRounds = 10

// ask is a server request waiting for the client's input.
type ask struct {
	key string // its key in inputRequests
	id  []byte // its id as the connection gave it
	msg []byte // the request
}

// modernStream is the Stream a stateless request's connection answers on.
// Its reply is translated for the revision and carries the id (and its
// progress the token) of the client's latest attempt: a retry after
// input_required has a new id. Log messages go out only when the request
// asked for a level. A server request becomes an input_required answer.
type modernStream struct {
	h      *Handler
	s      *session.Session
	conn   conn.StatelessConn
	method string
	logs   bool
	mrtr   bool // the method may be answered input_required
	pass   bool // the server speaks the revision: nothing is translated
	// seal: pass, and the server's requestState is sealed for sealOwner
	// (passstate.go).
	seal      bool
	sealOwner string
	digest    [32]byte // of the request, for its retries' requestState
	first     []byte   // the id the connection replies with
	token     []byte   // the progress token the connection uses (the first attempt's)

	mu       sync.Mutex
	st       *session.Stream // the current attempt's stream
	id       []byte          // the current attempt's id
	curToken []byte          // the current attempt's progress token
	answered bool            // the current attempt has its final answer
	asks     []ask           // server requests not answered yet
	final    []byte          // the server's reply, come while no attempt could take it
	handle   string          // the parked request's key ("" when not parked)
	deadline time.Time       // set when first parked: the end of its InputWait
	rounds   int             // input_required answers so far
	// gathering: a server request came and the input_required answer
	// waits askGather for others (flushAsks); ended: released, so that a
	// late flush parks nothing.
	gathering, ended bool
}

func newModernStream(h *Handler, s *session.Session, conn conn.StatelessConn, st *session.Stream, msg *jsonrpc.Message, req eras.Request) *modernStream {
	id := bytes.Clone(msg.Bytes(msg.ID))
	token := bytes.Clone(msg.Bytes(msg.ProgressToken))
	m := &modernStream{h: h, s: s, conn: conn, st: st, method: req.Method, logs: req.LogLevel != "",
		id: id, first: id, token: token, curToken: token, mrtr: protocol.AllowsInputRequired(req.Method)}
	if m.mrtr {
		m.digest = requestDigest(msg)
	}
	return m
}

func (m *modernStream) Send(msg []byte) {
	if m.pass {
		// The server ending a listen says so with notifications/cancelled
		// (its reply follows): on HTTP the stream just ends.
		if parsed, err := jsonrpc.Parse(msg); err != nil || !parsed.MethodIs(protocol.NotificationCancelled) {
			m.st.Send(msg)
		}
		return
	}
	parsed, err := jsonrpc.Parse(msg)
	if !m.logs && err == nil && parsed.Kind == jsonrpc.KindNotification && parsed.MethodIs(protocol.NotificationMessage) {
		return
	}
	if err == nil && parsed.Kind == jsonrpc.KindRequest {
		m.ask(&parsed)
		return
	}
	m.mu.Lock()
	st, token := m.st, m.curToken
	m.mu.Unlock()
	if err == nil && parsed.ProgressToken.Present() && !bytes.Equal(token, m.token) {
		msg = jsonrpc.Splice(nil, msg, jsonrpc.Edit{Span: parsed.ProgressToken, Value: token})
	}
	st.Send(msg)
}

func (m *modernStream) Reply(msg []byte) {
	if m.method == protocol.MethodToolsList && msg != nil {
		m.h.paramTools.observe(paramKey(m.s.Server, m.s.Owner), msg) // paramheaders.go
	}
	if m.pass {
		if m.seal && msg != nil {
			msg = m.h.sealReply(msg, m.s.Server, m.sealOwner)
		}
		m.st.Reply(msg)
		return
	}
	if msg != nil {
		msg = eras.FromSessionEra(nil, m.method, msg)
	}
	m.mu.Lock()
	if m.answered {
		// The attempt was answered input_required: the retry gets this.
		if m.final == nil {
			m.final = msg
			if msg == nil {
				m.final = []byte{}
			}
		}
		m.asks = nil // the server stopped waiting for them
		m.mu.Unlock()
		return
	}
	m.answered = true
	st, id := m.st, m.id
	m.mu.Unlock()
	st.Reply(m.withID(msg, id))
}

// withID returns reply with the id of the current attempt.
func (m *modernStream) withID(reply, id []byte) []byte {
	if len(reply) == 0 {
		return nil // the request was cancelled: no reply
	}
	if bytes.Equal(id, m.first) {
		return reply
	}
	parsed, err := jsonrpc.Parse(reply)
	if err != nil {
		return reply
	}
	return jsonrpc.Splice(nil, reply, jsonrpc.Edit{Span: parsed.ID, Value: id})
}

// ask handles a server request the connection routed to m: the client's
// current attempt is answered input_required, or, if it already has its
// answer, the request waits for the retry. A request the revision does not
// let a server make, or one during a method that cannot take input, is
// refused to the server.
func (m *modernStream) ask(msg *jsonrpc.Message) {
	id := bytes.Clone(msg.Bytes(msg.ID))
	if !m.mrtr || !eras.IsInputRequest(msg) {
		m.respondUp(jsonrpc.ErrorResponse(id, protocol.CodeMethodNotFound,
			"mcpgate: "+msg.MethodName()+" cannot be asked during "+m.method+" in protocol version "+protocol.StatelessVersion))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := "input-" + string(id)
	if k := eras.InputKey(msg); k != "" && !slices.ContainsFunc(m.asks, func(a ask) bool { return a.key == k }) {
		key = k // a 2026-07-28 server's own key, carried by the reverse bridge
	}
	m.asks = append(m.asks, ask{key: key, id: id, msg: bytes.Clone(msg.Raw)})
	if m.answered || m.gathering {
		return
	}
	// A server may ask several things at once (the Go SDK sends them
	// back to back): the answer waits a moment for the rest, so that the
	// client gets them in one input_required rather than one per round.
	m.gathering = true
	time.AfterFunc(askGather, m.flushAsks)
}

// askGather is how long an input_required answer waits, after the first
// server request, for others sent with it.
const askGather = 20 * time.Millisecond

// flushAsks answers the current attempt input_required with the server
// requests gathered, unless it was answered meanwhile or is over.
func (m *modernStream) flushAsks() {
	m.mu.Lock()
	m.gathering = false
	if m.answered || m.ended || len(m.asks) == 0 {
		m.mu.Unlock()
		return
	}
	answer, ok := m.inputRequiredLocked()
	st := m.st
	m.mu.Unlock()
	if !ok {
		m.h.release(m, "the request asked for input more than "+strconv.Itoa(maxInputRounds)+" times, or for longer than "+m.h.cfg.InputWait.String())
		return
	}
	st.Reply(answer)
}

// inputRequiredLocked answers the current attempt input_required with
// m.asks and parks the request (a new state; the previous one, if any, no
// longer opens). It reports false when the request is out of rounds or
// time: it must then be released. Called with m.mu held.
func (m *modernStream) inputRequiredLocked() ([]byte, bool) {
	m.answered = true
	now := time.Now()
	if m.deadline.IsZero() {
		m.deadline = now.Add(m.h.cfg.InputWait)
	}
	m.rounds++
	if m.rounds > maxInputRounds || !now.Before(m.deadline) {
		return nil, false
	}
	state := m.h.park(m, m.deadline)
	return inputRequired(m.id, m.asks, state), true
}

// respondUp sends the client side's response to a server request.
func (m *modernStream) respondUp(resp []byte) {
	parsed, err := jsonrpc.Parse(resp)
	if err == nil {
		m.conn.Handle(context.Background(), &parsed, nil)
	}
}

func (m *modernStream) isParked() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.handle != ""
}

// parking is the handler's table of requests parked for input.
type parking struct {
	once sync.Once
	mu   sync.Mutex
	reqs map[string]*parked // by handle
}

type parked struct {
	out   *modernStream
	timer *time.Timer
}

// init makes the table.
func (p *parking) init() {
	p.once.Do(func() { p.reqs = map[string]*parked{} })
}

// handleLen is the random part of a requestState, in bytes.
const handleLen = 16

// parkedPurpose is what a parked request's requestState is sealed for.
const parkedPurpose = "mcpgate/front/parked-requestState"

// park registers m (its m.mu held) until deadline under a new handle,
// replacing the one it had, and returns the requestState for its retry.
func (h *Handler) park(m *modernStream, deadline time.Time) string {
	p := &h.parking
	p.init()
	var handle [handleLen]byte
	_, _ = rand.Read(handle[:])
	key := hex.EncodeToString(handle[:])
	p.mu.Lock()
	if old := p.reqs[m.handle]; old != nil && m.handle != "" {
		old.timer.Stop()
		delete(p.reqs, m.handle)
	}
	p.reqs[key] = &parked{out: m, timer: time.AfterFunc(time.Until(deadline), func() { h.expire(key) })}
	p.mu.Unlock()
	m.handle = key

	plain := make([]byte, 0, handleLen+sha256.Size)
	plain = append(plain, handle[:]...)
	plain = append(plain, m.digest[:]...)
	return h.cfg.Seal.Seal(parkedPurpose, plain, time.Until(deadline))
}

// take removes key from the table; whoever takes an entry owns its
// request from then on.
func (p *parking) take(key string) *parked { return p.takeFor(key, "", "") }

// takeFor is take, of a request parked by a session of target server
// and owner only (server "": any): a retry is served on its request's own
// URL, to its own principal; another's leaves it parked.
func (p *parking) takeFor(key, server, owner string) *parked {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.reqs[key]
	if e != nil && server != "" && (e.out.s.Server != server || e.out.s.Owner != owner) {
		return nil
	}
	if e != nil {
		delete(p.reqs, key)
		e.timer.Stop()
	}
	return e
}

// expire ends a parked request whose retry did not come in time: its
// connection closes, which cancels the request upstream.
func (h *Handler) expire(key string) {
	if e := h.parking.take(key); e != nil {
		h.release(e.out, "no retry with inputResponses came within "+h.cfg.InputWait.String())
	}
}

// release ends the session of a stateless request that is over.
func (h *Handler) release(m *modernStream, reason string) {
	m.mu.Lock()
	m.handle, m.ended = "", true
	m.mu.Unlock()
	if h.store.Delete(m.s.ID) != nil {
		h.end(m.s, reason)
	}
}

// unparkStream takes m out of the table: its client left.
func (h *Handler) unparkStream(m *modernStream) {
	m.mu.Lock()
	key := m.handle
	m.handle = ""
	m.mu.Unlock()
	if key != "" {
		h.parking.take(key)
	}
}

// unparkAll drops every parked request's timer (the handler closes; the
// sessions are ended by Close).
func (h *Handler) unparkAll() {
	p := &h.parking
	p.mu.Lock()
	for key, e := range p.reqs {
		e.timer.Stop()
		delete(p.reqs, key)
	}
	p.mu.Unlock()
}

// errBadState is the answer to a requestState that does not open.
var errBadState = errors.New("mcpgate: requestState is not valid: altered, expired, already used, or from another request")

// unpark opens state, checks it against the retry's digest, the target
// it came to (server: a session key) and its principal (owner), and takes
// its request out of the table: a state opens once, on its request's URL,
// for its request's principal.
func (h *Handler) unpark(state string, digest [32]byte, server, owner string) (*modernStream, error) {
	p := &h.parking
	p.init()
	// Expired, sealed by a retired key, or forged: the same answer.
	plain, err := h.cfg.Seal.Open(parkedPurpose, state)
	if err != nil || len(plain) != handleLen+sha256.Size || !bytes.Equal(plain[handleLen:], digest[:]) {
		return nil, errBadState
	}
	e := p.takeFor(hex.EncodeToString(plain[:handleLen]), server, owner)
	if e == nil {
		return nil, errBadState
	}
	return e.out, nil
}

// resume serves the retry msg, come to target server (a session key), of
// a request answered input_required.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, server string, msg *jsonrpc.Message) {
	id := msg.Bytes(msg.ID)
	state, responses, err := retryParams(msg)
	if err != nil {
		writeErrorID(w, http.StatusBadRequest, id, protocol.CodeInvalidParams, err.Error(), nil)
		return
	}
	m, err := h.unpark(state, requestDigest(msg), server, h.owner(r))
	if err != nil {
		writeErrorID(w, http.StatusBadRequest, id, protocol.CodeInvalidParams, err.Error(), nil)
		return
	}
	// m is ours now: nobody else can take it (its state opened once).
	s := m.s
	s.Begin()
	defer func() {
		s.End(time.Now())
		if !m.isParked() {
			h.release(m, "the request ended")
		}
	}()
	st := s.NewStream(1, time.Now())
	st.Attach()
	defer st.Detach()

	m.mu.Lock()
	m.st, m.id, m.curToken, m.answered, m.handle = st, bytes.Clone(id), bytes.Clone(msg.Bytes(msg.ProgressToken)), false, ""
	if len(m.curToken) == 0 {
		m.curToken = m.token
	}
	var answers [][]byte
	var missing []ask
	for _, a := range m.asks {
		if resp, ok := responses[a.key]; ok {
			answers = append(answers, jsonrpc.Response(a.id, resp))
		} else {
			missing = append(missing, a)
		}
	}
	m.asks = missing
	var reply []byte
	release := false
	switch {
	case m.final != nil:
		// The server answered while the request was parked (its requests
		// to the client are moot).
		m.answered = true
		answers = nil
		if reply = m.withID(m.final, m.id); reply == nil {
			reply = jsonrpc.ErrorResponse(m.id, protocol.CodeInternalError, "mcpgate: the request was cancelled while it waited for input")
		}
	case len(missing) > 0:
		// Asked and not answered: asked again (the answered ones go up).
		var ok bool
		if reply, ok = m.inputRequiredLocked(); !ok {
			release = true
		}
	}
	m.mu.Unlock()
	if release {
		writeErrorID(w, http.StatusBadRequest, id, protocol.CodeInvalidParams,
			"mcpgate: the request asked for input more than "+strconv.Itoa(maxInputRounds)+" times, or for longer than "+h.cfg.InputWait.String(), nil)
		return
	}
	for _, a := range answers {
		m.respondUp(a)
	}
	if reply != nil {
		st.Reply(reply)
	}
	h.await(w, r, s, st, m, msg)
}

// isRetry reports whether msg carries params.requestState (a cheap look
// first: most requests have none). inputResponses without a state are
// extra params of a new request, which the revision has servers ignore.
func isRetry(msg *jsonrpc.Message) bool {
	if !bytes.Contains(msg.Raw, []byte("requestState")) {
		return false
	}
	var p struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg.Raw, &p) != nil {
		return false
	}
	_, state := p.Params["requestState"]
	return state
}

// sealedRetry reports whether a retry's requestState has the shape of
// one the gateway sealed (what park returns: a handle and a digest,
// sealed by a key the ring holds or held). Any other state is the
// server's own (a server on an SDK of both eras may answer a session-era
// request with its own input round, which FromSessionEra marks
// input_required): the retry then goes to the server as a new request,
// state and inputResponses as they came, for the server to check. A
// gateway state altered to another length is thereby the server's to
// refuse; altered in place, it is refused here.
func (h *Handler) sealedRetry(msg *jsonrpc.Message) bool {
	state, _, err := retryParams(msg)
	if err != nil {
		return true // resume refuses it, naming why
	}
	return h.cfg.Seal.Shaped(state, handleLen+sha256.Size)
}

// retryParams returns a retry's requestState and inputResponses.
func retryParams(msg *jsonrpc.Message) (string, map[string]json.RawMessage, error) {
	var p struct {
		Params struct {
			RequestState   *string         `json:"requestState"`
			InputResponses json.RawMessage `json:"inputResponses"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg.Raw, &p); err != nil || p.Params.RequestState == nil {
		return "", nil, errors.New("mcpgate: a request with inputResponses needs the requestState it was given (a string)")
	}
	responses := map[string]json.RawMessage{}
	if len(p.Params.InputResponses) > 0 {
		if err := json.Unmarshal(p.Params.InputResponses, &responses); err != nil || responses == nil {
			return "", nil, errors.New("mcpgate: inputResponses must be an object of responses by key")
		}
		for k, v := range responses {
			if len(v) == 0 || v[0] != '{' {
				return "", nil, errors.New("mcpgate: inputResponses." + k + " must be an object (the result of the request it answers)")
			}
		}
	}
	return *p.Params.RequestState, responses, nil
}

// requestDigest is the digest a requestState binds: the method and the
// params without inputResponses, requestState and _meta, in a canonical
// form (keys sorted, whitespace gone), so a retry that re-encodes the same
// request matches.
func requestDigest(msg *jsonrpc.Message) [32]byte {
	var p struct {
		Params map[string]any `json:"params"`
	}
	_ = json.Unmarshal(msg.Raw, &p) // a parsed message: valid JSON
	delete(p.Params, "inputResponses")
	delete(p.Params, "requestState")
	delete(p.Params, "_meta")
	canon, _ := json.Marshal(p.Params)
	h := sha256.New()
	h.Write([]byte(msg.MethodName()))
	h.Write([]byte{0})
	h.Write(canon)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// inputRequired is the input_required answer to request id: the server's
// requests by key, and the state for the retry.
func inputRequired(id []byte, asks []ask, state string) []byte {
	b := []byte(`{"resultType":"input_required","inputRequests":{`)
	for i, a := range asks {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(a.msg, &req) // a parsed message: valid JSON
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, a.key)
		b = append(b, `:{"method":`...)
		b = strconv.AppendQuote(b, req.Method)
		if len(req.Params) > 0 {
			b = append(b, `,"params":`...)
			b = append(b, req.Params...)
		}
		b = append(b, '}')
	}
	b = append(b, `},"requestState":`...)
	b = strconv.AppendQuote(b, state)
	b = append(b, '}')
	return jsonrpc.Response(id, b)
}
