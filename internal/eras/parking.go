package eras

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/seal"
)

// This file is the table of stateless requests parked for input
// (mrtr.go), and the requestState that names one.
//
// A requestState is sealed by the key ring (Ring) until the request's
// deadline: it names the parked request (random, single use: a request
// has one valid state at a time) and holds a digest of the request
// (method and params without inputResponses, requestState and _meta), so
// it cannot be forged, altered, replayed or used for another request. A
// request is parked for Wait in all, over at most maxInputRounds rounds:
// then it is cancelled upstream, so no client holds a shared server's
// attention (its requests to clients) for longer.

// Parking is the stateless requests of one front: their connections'
// Streams (Serve), the table of those parked for input, and the key ring
// that seals their requestStates and passthrough servers' states. S is the
// front's record of a request (its session).
//
// Locking: mu guards the table; an Exchange's own mutex is taken before
// it (park runs with the Exchange's held), never after.
type Parking[S any] struct {
	// Wait bounds how long a request may stay parked, over all its
	// rounds (the front's InputWait). Set before use.
	Wait time.Duration
	// Release ends the front's record of a request that is over: out of
	// rounds or time, or not retried in time (its connection closes,
	// which cancels the request upstream). Set before use; called
	// without locks held.
	Release func(session S, reason string)

	// Ring seals the requestStates (the gateway's key ring: a state opens
	// on every replica holding its key). Set before use.
	Ring *seal.Ring
	// Place, when set, is sealed into every requestState: where the
	// request is parked (the front's encoding of its replica), so that a
	// retry landing on another replica can be sent here (Elsewhere). At
	// most MaxPlace bytes (longer: not sealed). Set before use.
	Place []byte

	once sync.Once
	mu   sync.Mutex
	reqs map[string]*parked[S] // by handle
}

type parked[S any] struct {
	out   *Exchange[S]
	timer *time.Timer
}

// init makes the table.
func (p *Parking[S]) init() {
	p.once.Do(func() { p.reqs = map[string]*parked[S]{} })
}

// parkedPurpose is what a parked request's requestState is sealed for.
const parkedPurpose = "mcpgate/front/parked-requestState"

// Len returns how many requests are parked.
func (p *Parking[S]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

// LockForTest holds the table's lock until unlock is called: a front test
// widens the window between a retry's expiry check and its taking the
// request, which the expiry timer races (the interleaving is possible
// without it). Nothing else calls it.
func (p *Parking[S]) LockForTest() (unlock func()) {
	p.init()
	p.mu.Lock()
	return p.mu.Unlock
}

// handleLen is the random part of a requestState, in bytes.
const handleLen = 16

// park registers x (its x.mu held) until deadline under a new handle,
// replacing the one it had, and returns the requestState for its retry.
func (p *Parking[S]) park(x *Exchange[S], deadline time.Time) string {
	p.init()
	var handle [handleLen]byte
	_, _ = rand.Read(handle[:])
	key := hex.EncodeToString(handle[:])
	p.mu.Lock()
	if old := p.reqs[x.handle]; old != nil && x.handle != "" {
		old.timer.Stop()
		delete(p.reqs, x.handle)
	}
	p.reqs[key] = &parked[S]{out: x, timer: time.AfterFunc(time.Until(deadline), func() { p.expire(key) })}
	p.mu.Unlock()
	x.handle = key

	plain := make([]byte, 0, handleLen+sha256.Size+placeBlockLen)
	plain = append(plain, handle[:]...)
	if !x.digested {
		// Computed when first sealed, while the request's POST (its
		// body) is still being answered; a request never parked never
		// pays for it.
		x.digest, x.digested = requestDigest(x.method, x.request), true
	}
	plain = append(plain, x.digest[:]...)
	plain = p.appendPlace(plain) // parking_place.go
	return p.Ring.Seal(parkedPurpose, plain, time.Until(deadline))
}

// take removes key from the table; whoever takes an entry owns its
// request from then on.
func (p *Parking[S]) take(key string) *parked[S] { return p.takeFor(key, "", "") }

// takeFor is take, of a request parked by a session of target and owner
// only (target "": any): a retry is served on its request's own URL, to
// its own principal; another's leaves it parked.
func (p *Parking[S]) takeFor(key, target, owner string) *parked[S] {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.reqs[key]
	if e != nil && target != "" && (e.out.origin.Target != target || e.out.origin.Owner != owner) {
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
func (p *Parking[S]) expire(key string) {
	if e := p.take(key); e != nil {
		p.release(e.out, "no retry with inputResponses came within "+p.Wait.String())
	}
}

// End releases x, whose request is over: the front's record of it ends.
func (p *Parking[S]) End(x *Exchange[S], reason string) { p.release(x, reason) }

// release ends the front's record of a stateless request that is over.
func (p *Parking[S]) release(x *Exchange[S], reason string) {
	x.mu.Lock()
	x.handle, x.ended = "", true
	x.mu.Unlock()
	p.Release(x.origin.Session, reason)
}

// unpark takes x out of the table: its client left.
func (p *Parking[S]) unpark(x *Exchange[S]) {
	x.mu.Lock()
	key := x.handle
	x.handle = ""
	x.mu.Unlock()
	if key != "" {
		p.take(key)
	}
}

// Close drops every parked request's timer (the front closes; it ends
// their records itself).
func (p *Parking[S]) Close() {
	p.mu.Lock()
	for key, e := range p.reqs {
		e.timer.Stop()
		delete(p.reqs, key)
	}
	p.mu.Unlock()
}

// errBadState is the answer to a requestState that does not open.
var errBadState = errors.New("mcpgate: requestState is not valid: altered, expired, already used, or from another request")

// Unpark opens the requestState of retry msg, checks it against the
// retry's digest, the target it came to (a session key) and its principal
// (owner), and takes its request out of the table: a state opens once, on
// its request's URL, for its request's principal. The caller owns the
// request from then on: it calls Resume with the retry's stream, and ends
// it (End) once it is over and not parked again.
func (p *Parking[S]) Unpark(msg *jsonrpc.Message, target, owner string) (*Exchange[S], *Problem) {
	state, responses, err := retryParams(msg)
	if err != nil {
		return nil, invalid(err.Error())
	}
	p.init()
	// Expired, sealed by a retired key, or forged: the same answer.
	plain, err := p.Ring.Open(parkedPurpose, state)
	if err != nil || !parkedShape(len(plain)) {
		return nil, invalid(errBadState.Error())
	}
	if digest := requestDigest(msg.MethodName(), msg.Raw); !bytes.Equal(plain[handleLen:handleLen+sha256.Size], digest[:]) {
		return nil, invalid(errBadState.Error())
	}
	e := p.takeFor(hex.EncodeToString(plain[:handleLen]), target, owner)
	if e == nil {
		return nil, invalid(errBadState.Error())
	}
	e.out.mu.Lock()
	e.out.responses = responses
	e.out.mu.Unlock()
	return e.out, nil
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
// one the gateway sealed (what park returns: a handle and a digest, and
// a place or not, sealed by a key the ring holds or held). Any other state is the
// server's own (a server on an SDK of both eras may answer a session-era
// request with its own input round, which FromSessionEra marks
// input_required): the retry then goes to the server as a new request,
// state and inputResponses as they came, for the server to check. A
// gateway state altered to another length is thereby the server's to
// refuse; altered in place, it is refused here.
func (p *Parking[S]) sealedRetry(msg *jsonrpc.Message) bool {
	state, _, err := retryParams(msg)
	if err != nil {
		return true // Unpark refuses it, naming why
	}
	return p.Ring.Shaped(state, handleLen+sha256.Size) || p.Ring.Shaped(state, handleLen+sha256.Size+placeBlockLen)
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
// params of request raw (parsed: valid JSON) without inputResponses, requestState and _meta, in a canonical form (RFC
// 8785: members sorted at every depth, whitespace gone, numbers and
// strings in one spelling), so a retry that re-encodes the same request
// matches. Absent params are those of {}. It reads the bytes as they are:
// the members kept are copied once into the canonical form, nothing is
// decoded into Go values.
func requestDigest(method string, raw []byte) [32]byte {
	params := find(raw, wholeValue(raw), "params")
	obj := make([]byte, 0, 2+max(params.End-params.Start, 0))
	obj = append(obj, '{')
	w := objectAt(raw, params)
	for m, ok := w.next(); ok; m, ok = w.next() {
		if keyIs(raw, m, "inputResponses") || keyIs(raw, m, "requestState") || keyIs(raw, m, "_meta") {
			continue
		}
		if len(obj) > 1 {
			obj = append(obj, ',')
		}
		obj = append(obj, raw[m.key.Start:m.val.End]...)
	}
	obj = append(obj, '}')
	canon := jsontext.Value(obj)
	if canon.Canonicalize() != nil {
		// A member named twice inside the params (Parse checks the
		// envelope): the request is ambiguous, and its digest is of the
		// members as they came, so only a retry spelled the same
		// matches.
		canon = jsontext.Value(obj)
	}
	h := sha256.New()
	h.Write([]byte(method))
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
