package eras

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file bridges the stateless revision's multi round-trip requests
// (MRTR) to an initialized server's server-to-client requests. When the
// server asks (sampling/createMessage, elicitation/create, roots/list)
// while it serves a client's tools/call, prompts/get or resources/read, the
// client's request is answered input_required: the server's request under
// a key in inputRequests, and a requestState sealed by the gateway. The
// upstream request stays parked, its connection open (parking.go). The
// client's retry (a new id, the same request plus inputResponses and the
// requestState) opens the state, answers the server's requests with the
// responses, and waits for the server's result, which is delivered as the
// retry's answer; a server that asks again gets another round.
//
// The front writes each attempt's answers (JSON or SSE) from the Stream
// it gives; an Exchange decides what goes on it.

// inputMethods are the methods the revision allows input_required for.
var inputMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// maxInputRounds bounds the input_required answers one request gets.
const maxInputRounds = 10

// ask is a server request waiting for the client's input.
type ask struct {
	key string // its key in inputRequests
	id  []byte // its id as the connection gave it
	msg []byte // the request
}

// Origin is what the front knows of a stateless request: its record of
// it, where it came and from whom.
type Origin[S any] struct {
	// Session is the front's record of the request, given back with a
	// retry (Unpark) and to Parking.Release.
	Session S
	// Target and Owner are the target the request came to (a session
	// key) and its principal's key: a retry must come to and from both;
	// a passthrough server's requestState is sealed for both.
	Target, Owner string
	// Bind: requests are authenticated, so a passthrough server's
	// requestState is bound to Target and Owner (passstate.go).
	Bind bool
	// Header is the POST's headers, given to a passthrough connection (a
	// server of the revision checks the Mcp-Param-* headers).
	Header http.Header
	// Observe, if set, sees each reply of the connection as it came.
	Observe func(reply []byte)
}

// Exchange is the Stream a stateless request's connection answers on,
// over all its attempts. Its reply is translated for the revision and
// carries the id (and its progress the token) of the client's latest
// attempt: a retry after input_required has a new id. Log messages go out
// only when the request asked for a level. A server request becomes an
// input_required answer.
type Exchange[S any] struct {
	p      *Parking[S]
	conn   conn.StatelessConn
	origin Origin[S]
	method string
	logs   bool
	mrtr   bool // the method may be answered input_required
	pass   bool // the server speaks the revision: nothing is translated
	// seal: pass, and the server's requestState is sealed for the origin
	// (passstate.go).
	seal bool
	// request is the first attempt's bytes (its POST's body, not copied:
	// the POST lasts until the request is first parked or answered);
	// digest is taken of it when first parked (digested), for its
	// retries' requestState.
	request  []byte
	digest   [32]byte
	digested bool
	first    []byte // the id the connection replies with
	token    []byte // the progress token the connection uses (the first attempt's)

	mu       sync.Mutex
	st       conn.Stream // the current attempt's stream
	id       []byte      // the current attempt's id
	curToken []byte      // the current attempt's progress token
	answered bool        // the current attempt has its final answer
	asks     []ask       // server requests not answered yet
	final    []byte      // the server's reply, come while no attempt could take it
	handle   string      // the parked request's key ("" when not parked)
	deadline time.Time   // set when first parked: the end of its InputWait
	rounds   int         // input_required answers so far
	// responses: the inputResponses of the retry Unpark took it for,
	// until Resume.
	responses map[string]json.RawMessage
	// gathering: a server request came and the input_required answer
	// waits askGather for others (flushAsks); ended: released or
	// abandoned, so that a late flush parks nothing.
	gathering, ended bool
}

// Session is the front's record of the request.
func (x *Exchange[S]) Session() S { return x.origin.Session }

func (x *Exchange[S]) Send(msg []byte) {
	if x.pass {
		// The server ending a listen says so with notifications/cancelled
		// (its reply follows): on HTTP the stream just ends.
		if parsed, err := jsonrpc.Parse(msg); err != nil || !parsed.MethodIs("notifications/cancelled") {
			x.st.Send(msg)
		}
		return
	}
	parsed, err := jsonrpc.Parse(msg)
	if !x.logs && err == nil && parsed.Kind == jsonrpc.KindNotification && parsed.MethodIs("notifications/message") {
		return
	}
	if err == nil && parsed.Kind == jsonrpc.KindRequest {
		x.ask(&parsed)
		return
	}
	x.mu.Lock()
	st, token := x.st, x.curToken
	x.mu.Unlock()
	if err == nil && parsed.ProgressToken.Present() && !bytes.Equal(token, x.token) {
		msg = jsonrpc.Splice(nil, msg, jsonrpc.Edit{Span: parsed.ProgressToken, Value: token})
	}
	st.Send(msg)
}

func (x *Exchange[S]) Reply(msg []byte) {
	if x.origin.Observe != nil && msg != nil {
		x.origin.Observe(msg)
	}
	if x.pass {
		if x.seal && msg != nil {
			msg = x.p.sealReply(msg, x.origin.Target, x.origin.Owner)
		}
		x.st.Reply(msg)
		return
	}
	if msg != nil {
		msg = FromSessionEra(nil, x.method, msg)
	}
	x.mu.Lock()
	if x.answered {
		// The attempt was answered input_required: the retry gets this.
		if x.final == nil {
			x.final = msg
			if msg == nil {
				x.final = []byte{}
			}
		}
		x.asks = nil // the server stopped waiting for them
		x.mu.Unlock()
		return
	}
	x.answered = true
	st, id := x.st, x.id
	x.mu.Unlock()
	st.Reply(x.withID(msg, id))
}

// withID returns reply with the id of the current attempt.
func (x *Exchange[S]) withID(reply, id []byte) []byte {
	if len(reply) == 0 {
		return nil // the request was cancelled: no reply
	}
	if bytes.Equal(id, x.first) {
		return reply
	}
	parsed, err := jsonrpc.Parse(reply)
	if err != nil {
		return reply
	}
	return jsonrpc.Splice(nil, reply, jsonrpc.Edit{Span: parsed.ID, Value: id})
}

// ask handles a server request the connection routed to x: the client's
// current attempt is answered input_required, or, if it already has its
// answer, the request waits for the retry. A request the revision does not
// let a server make, or one during a method that cannot take input, is
// refused to the server.
func (x *Exchange[S]) ask(msg *jsonrpc.Message) {
	id := bytes.Clone(msg.Bytes(msg.ID))
	if !x.mrtr || !IsInputRequest(msg) {
		x.respondUp(jsonrpc.ErrorResponse(id, protocol.CodeMethodNotFound,
			"mcpgate: "+msg.MethodName()+" cannot be asked during "+x.method+" in protocol version "+protocol.StatelessVersion))
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	key := "input-" + string(id)
	if k := InputKey(msg); k != "" && !slices.ContainsFunc(x.asks, func(a ask) bool { return a.key == k }) {
		key = k // a 2026-07-28 server's own key, carried by the reverse bridge
	}
	x.asks = append(x.asks, ask{key: key, id: id, msg: bytes.Clone(msg.Raw)})
	if x.answered || x.gathering {
		return
	}
	// A server may ask several things at once (the Go SDK sends them
	// back to back): the answer waits a moment for the rest, so that the
	// client gets them in one input_required rather than one per round.
	x.gathering = true
	time.AfterFunc(askGather, x.flushAsks)
}

// askGather is how long an input_required answer waits, after the first
// server request, for others sent with it.
const askGather = 20 * time.Millisecond

// flushAsks answers the current attempt input_required with the server
// requests gathered, unless it was answered meanwhile or is over.
func (x *Exchange[S]) flushAsks() {
	x.mu.Lock()
	x.gathering = false
	if x.answered || x.ended || len(x.asks) == 0 {
		x.mu.Unlock()
		return
	}
	answer, ok := x.inputRequiredLocked()
	st := x.st
	x.mu.Unlock()
	if !ok {
		x.p.release(x, "the request asked for input more than "+strconv.Itoa(maxInputRounds)+" times, or for longer than "+x.p.Wait.String())
		return
	}
	st.Reply(answer)
}

// inputRequiredLocked answers the current attempt input_required with
// x.asks and parks the request (a new state; the previous one, if any, no
// longer opens). It reports false when the request is out of rounds or
// time: it must then be released. Called with x.mu held.
func (x *Exchange[S]) inputRequiredLocked() ([]byte, bool) {
	x.answered = true
	now := time.Now()
	if x.deadline.IsZero() {
		x.deadline = now.Add(x.p.Wait)
	}
	x.rounds++
	if x.rounds > maxInputRounds || !now.Before(x.deadline) {
		return nil, false
	}
	state := x.p.park(x, x.deadline)
	return inputRequired(x.id, x.asks, state), true
}

// respondUp sends the client side's response to a server request.
func (x *Exchange[S]) respondUp(resp []byte) {
	parsed, err := jsonrpc.Parse(resp)
	if err == nil {
		x.conn.Handle(context.Background(), &parsed, nil)
	}
}

// Parked reports whether the request is parked for input: its record
// must live on for the retry.
func (x *Exchange[S]) Parked() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.handle != ""
}

// Abandon cancels the request upstream, even one parked for input: its
// client left. It is over: an input_required answer still gathering
// (flushAsks) parks nothing, since nobody can retry it.
func (x *Exchange[S]) Abandon() {
	x.mu.Lock()
	x.ended = true
	x.mu.Unlock()
	x.p.unpark(x)
	x.conn.Abandon(x)
}

// Resume has the retry msg of the request, unparked by Unpark, go on
// with st as its stream: the server's requests it answers go up, and st
// gets what the server answered meanwhile, or the next input_required. A
// request out of rounds or time is refused (and is no longer parked).
func (x *Exchange[S]) Resume(msg *jsonrpc.Message, st conn.Stream) *Problem {
	id := msg.Bytes(msg.ID)
	x.mu.Lock()
	responses := x.responses
	x.responses = nil
	x.st, x.id, x.curToken, x.answered, x.handle = st, bytes.Clone(id), bytes.Clone(msg.Bytes(msg.ProgressToken)), false, ""
	if len(x.curToken) == 0 {
		x.curToken = x.token
	}
	var answers [][]byte
	var missing []ask
	for _, a := range x.asks {
		if resp, ok := responses[a.key]; ok {
			answers = append(answers, jsonrpc.Response(a.id, resp))
		} else {
			missing = append(missing, a)
		}
	}
	x.asks = missing
	var reply []byte
	release := false
	switch {
	case x.final != nil:
		// The server answered while the request was parked (its requests
		// to the client are moot).
		x.answered = true
		answers = nil
		if reply = x.withID(x.final, x.id); reply == nil {
			reply = jsonrpc.ErrorResponse(x.id, protocol.CodeInternalError, "mcpgate: the request was cancelled while it waited for input")
		}
	case len(missing) > 0:
		// Asked and not answered: asked again (the answered ones go up).
		var ok bool
		if reply, ok = x.inputRequiredLocked(); !ok {
			release = true
		}
	}
	x.mu.Unlock()
	if release {
		return invalid("mcpgate: the request asked for input more than " + strconv.Itoa(maxInputRounds) + " times, or for longer than " + x.p.Wait.String())
	}
	for _, a := range answers {
		x.respondUp(a)
	}
	if reply != nil {
		st.Reply(reply)
	}
	return nil
}

// invalid is a 400 invalid-params refusal of a stateless request.
func invalid(text string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Code: protocol.CodeInvalidParams, Message: text}
}
