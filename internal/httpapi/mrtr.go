package httpapi

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
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
// A requestState is AES-GCM sealed with a key made when the handler
// starts: it names the parked request (random, single use), an expiry, and
// a digest of the request (method and params without inputResponses,
// requestState and _meta), so it cannot be forged, altered, replayed or
// used for another request. A request whose retry does not come within
// InputWait is cancelled upstream.

// inputMethods are the methods the revision allows input_required for.
var inputMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// ask is a server request waiting for the client's input.
type ask struct {
	key string // its key in inputRequests
	id  []byte // its id as the connection gave it
	msg []byte // the request
}

// parking is the handler's table of requests parked for input.
type parking struct {
	once sync.Once
	aead cipher.AEAD
	mu   sync.Mutex
	reqs map[string]*parked // by handle
}

type parked struct {
	out   *modernStream
	timer *time.Timer
}

// init makes the sealing key.
func (p *parking) init() {
	p.once.Do(func() {
		key := make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand)
		block, err := aes.NewCipher(key)
		if err != nil {
			panic(err) // a 32-byte key is always valid
		}
		p.aead, _ = cipher.NewGCM(block)
		p.reqs = map[string]*parked{}
	})
}

// handleLen is the random part of a requestState, in bytes.
const handleLen = 16

// ask records a server request the connection routed to m: the client's
// current attempt is answered input_required, or, if it already was, the
// request waits for the retry. A server request during a method that
// cannot take input is refused to the server.
func (m *modernStream) ask(msg *jsonrpc.Message) {
	id := bytes.Clone(msg.Bytes(msg.ID))
	if !m.mrtr {
		refusal := jsonrpc.ErrorResponse(id, jsonrpc.CodeMethodNotFound,
			"mcpgate: "+msg.MethodName()+" cannot be asked during "+m.method+" in protocol version "+statelessVersion)
		m.respondUp(refusal)
		return
	}
	a := ask{key: "input-" + string(id), id: id, msg: bytes.Clone(msg.Raw)}
	m.mu.Lock()
	m.asks = append(m.asks, a)
	if m.parked {
		m.mu.Unlock()
		return
	}
	m.parked = true
	st, reqID, asks := m.st, m.id, append([]ask(nil), m.asks...)
	m.mu.Unlock()
	st.Reply(inputRequired(reqID, asks, m.h.park(m)))
}

// respondUp sends the client side's response to a server request.
func (m *modernStream) respondUp(resp []byte) {
	parsed, err := jsonrpc.Parse(resp)
	if err == nil {
		m.conn.Handle(context.Background(), &parsed, nil)
	}
}

// park registers m, whose current attempt is answered input_required, and
// returns the requestState for its retry.
func (h *Handler) park(m *modernStream) string {
	p := &h.parking
	p.init()
	var handle [handleLen]byte
	_, _ = rand.Read(handle[:])
	key := hex.EncodeToString(handle[:])
	expires := time.Now().Add(h.cfg.InputWait)
	p.mu.Lock()
	p.reqs[key] = &parked{out: m, timer: time.AfterFunc(h.cfg.InputWait, func() { h.expire(key) })}
	p.mu.Unlock()

	plain := make([]byte, 0, handleLen+8+sha256.Size)
	plain = append(plain, handle[:]...)
	plain = binary.BigEndian.AppendUint64(plain, uint64(expires.UnixNano()))
	plain = append(plain, m.digest[:]...)
	nonce := make([]byte, p.aead.NonceSize(), p.aead.NonceSize()+len(plain)+p.aead.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(p.aead.Seal(nonce, nonce, plain, nil))
}

// expire ends a parked request whose retry did not come in time: its
// connection closes, which cancels the request upstream.
func (h *Handler) expire(key string) {
	p := &h.parking
	p.mu.Lock()
	e := p.reqs[key]
	delete(p.reqs, key)
	p.mu.Unlock()
	if e == nil {
		return
	}
	h.release(e.out, "no retry with inputResponses came within "+h.cfg.InputWait.String())
}

// release ends the session of a stateless request that is over.
func (h *Handler) release(m *modernStream, reason string) {
	if h.store.Remove(m.s.ID) != nil {
		h.end(m.s, reason)
	}
}

// unparkStream takes m out of the table (its client left).
func (h *Handler) unparkStream(m *modernStream) {
	p := &h.parking
	p.mu.Lock()
	for key, e := range p.reqs {
		if e.out == m {
			e.timer.Stop()
			delete(p.reqs, key)
		}
	}
	p.mu.Unlock()
	m.mu.Lock()
	m.parked = false
	m.mu.Unlock()
}

// errBadState is the answer to a requestState that does not open.
var errBadState = errors.New("mcpgate: requestState is not valid: altered, expired, already used, or from another request")

// unpark opens state, checks it against the retry's digest and takes its
// request out of the table: a state opens once.
func (h *Handler) unpark(state string, digest [32]byte) (*modernStream, error) {
	p := &h.parking
	p.init()
	raw, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil || len(raw) < p.aead.NonceSize() {
		return nil, errBadState
	}
	n := p.aead.NonceSize()
	plain, err := p.aead.Open(nil, raw[:n], raw[n:], nil)
	if err != nil || len(plain) != handleLen+8+sha256.Size {
		return nil, errBadState
	}
	expires := time.Unix(0, int64(binary.BigEndian.Uint64(plain[handleLen:])))
	if time.Now().After(expires) || !bytes.Equal(plain[handleLen+8:], digest[:]) {
		return nil, errBadState
	}
	key := hex.EncodeToString(plain[:handleLen])
	p.mu.Lock()
	e := p.reqs[key]
	delete(p.reqs, key)
	p.mu.Unlock()
	if e == nil || !e.timer.Stop() {
		return nil, errBadState
	}
	return e.out, nil
}

// resume serves the retry msg of a request answered input_required.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	id := msg.Bytes(msg.ID)
	state, responses, err := retryParams(msg)
	if err != nil {
		writeErrorID(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidParams, err.Error(), nil)
		return
	}
	m, err := h.unpark(state, requestDigest(msg))
	if err != nil {
		writeErrorID(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidParams, err.Error(), nil)
		return
	}
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
	m.st, m.id, m.parked = st, bytes.Clone(id), false
	asks := m.asks
	m.asks = nil
	m.mu.Unlock()

	var missing []ask
	for _, a := range asks {
		resp, ok := responses[a.key]
		if !ok {
			missing = append(missing, a)
			continue
		}
		m.respondUp(jsonrpc.Response(a.id, resp))
	}
	if len(missing) > 0 {
		// Asked and not answered: asked again, with a new state.
		m.mu.Lock()
		m.asks = append(missing, m.asks...)
		m.parked = true
		again := append([]ask(nil), m.asks...)
		m.mu.Unlock()
		st.Reply(inputRequired(id, again, h.park(m)))
	}
	h.await(w, r, s, st, m, msg)
}

// isRetry reports whether msg carries params.requestState or
// params.inputResponses (a cheap look first: most requests have neither).
func isRetry(msg *jsonrpc.Message) bool {
	if !bytes.Contains(msg.Raw, []byte("requestState")) && !bytes.Contains(msg.Raw, []byte("inputResponses")) {
		return false
	}
	var p struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg.Raw, &p) != nil {
		return false
	}
	_, state := p.Params["requestState"]
	_, inputs := p.Params["inputResponses"]
	return state || inputs
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
