package eras

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// run carries one request of a reverse session to its final answer: a
// stateless request per round, the client asked for what an input_required
// result needs between rounds.
func (c *reverseConn) run(ctx context.Context, cl *conn.Call[reverseCall], raw []byte, meta map[string]json.RawMessage) {
	defer c.forget(cl)
	msg, err := jsonrpc.Parse(raw)
	if err != nil { // it parsed once: cannot happen
		cl.Fail(protocol.CodeInternalError, "mcpgate: "+err.Error())
		return
	}
	var extra map[string]json.RawMessage // the retry's inputResponses and requestState
	for round := 0; ; round++ {
		id := cl.ID
		if round > 0 {
			id = c.nextID("retry") // the revision: a retry is a new request
		}
		req, err := BridgeRequest(&msg, id, meta, extra)
		if err != nil {
			cl.Fail(protocol.CodeInvalidParams, "mcpgate: "+err.Error())
			return
		}
		reply, err := c.roundTrip(ctx, cl, req)
		if err != nil {
			c.settle(ctx, cl, err)
			return
		}
		ir, ok, err := ParseInputRequired(reply)
		switch {
		case !ok:
			if final, ok := withID(reply, cl.ID); ok {
				cl.Reply(final)
			} else {
				cl.Fail(protocol.CodeInternalError, "mcpgate: the server's answer is not a JSON-RPC response")
			}
			return
		case err != nil:
			cl.Fail(protocol.CodeInternalError, "mcpgate: the server's answer: "+err.Error())
			return
		case round+1 >= reverseRounds:
			cl.Fail(protocol.CodeInternalError, fmt.Sprintf("mcpgate: the server still asked for input after %d rounds", reverseRounds))
			return
		}
		responses, err := c.askClient(ctx, cl, ir.Requests, meta[protocol.MetaClientCapabilities])
		if err != nil {
			c.settle(ctx, cl, err)
			return
		}
		extra = map[string]json.RawMessage{"inputResponses": responses}
		if ir.State != nil {
			extra["requestState"] = ir.State
		}
	}
}

// settle answers a request that ended without the server's final answer:
// nothing if its client cancelled it or left (it is done already), else
// the reason.
func (c *reverseConn) settle(ctx context.Context, cl *conn.Call[reverseCall], err error) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		cl.Fail(protocol.CodeServerError, fmt.Sprintf("mcpgate: request timed out after %v", c.timeout))
	case c.ctx.Err() != nil:
		cl.Fail(protocol.CodeServerError, errReverseClosed.Error())
	default:
		cl.Fail(protocol.CodeServerError, err.Error())
	}
}

// roundTrip sends req as a stateless request and returns the server's
// final answer; the messages before it (progress, log messages) go to the
// client's stream as they come.
func (c *reverseConn) roundTrip(ctx context.Context, cl *conn.Call[reverseCall], req []byte) ([]byte, error) {
	sc, err := c.open(ctx, c.general)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	if ctx.Err() != nil {
		// Cancelled, timed out or closed while opening: the server must
		// not get a request nobody waits for.
		return nil, ctx.Err()
	}
	msg, err := jsonrpc.Parse(req)
	if err != nil {
		return nil, err
	}
	rs := &replyStream{send: cl.Send, final: make(chan []byte, 1)}
	sc.Handle(ctx, &msg, rs)
	select {
	case reply := <-rs.final:
		if reply == nil {
			return nil, errors.New("mcpgate: the request was cancelled")
		}
		return reply, nil
	case <-ctx.Done():
		sc.Abandon(rs) // the server gets notifications/cancelled
		return nil, ctx.Err()
	}
}

// replyStream is the stream of one stateless request of a reverse session.
type replyStream struct {
	send  func([]byte)
	final chan []byte // capacity 1: the one final answer
}

func (s *replyStream) Send(msg []byte) { s.send(msg) }

func (s *replyStream) Reply(msg []byte) {
	select {
	case s.final <- bytes.Clone(msg):
	default: // a second final answer: the first counts
	}
}

// askClient sends the client the server's input requests, as server
// requests on the stream of the request that needs them, and returns
// their answers as inputResponses. All are asked at once (a client may
// answer in any order). A request the client answers with an error is
// left out: the server asks again or fails, as the revision says.
func (c *reverseConn) askClient(ctx context.Context, cl *conn.Call[reverseCall], reqs []InputRequest, caps json.RawMessage) (json.RawMessage, error) {
	type pending struct {
		key string
		id  string
		ch  chan json.RawMessage
	}
	asked := make([]pending, 0, len(reqs))
	c.mu.Lock()
	for _, r := range reqs {
		p := pending{key: r.Key, id: string(c.nextID("ask")), ch: make(chan json.RawMessage, 1)}
		c.waiting[p.id] = p.ch
		asked = append(asked, p)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		for _, p := range asked {
			delete(c.waiting, p.id)
		}
		c.mu.Unlock()
	}()
	declared := declaredInputs(caps)
	answered := make([]bool, len(asked))
	for i, r := range reqs {
		if !declared[r.Method] {
			// The session did not declare it: the client is not asked (as
			// in shared mode), the input is left out, and the server asks
			// again or fails. A server of the revision must not ask so.
			answered[i] = true
			continue
		}
		// The server's key rides along, for a client of 2026-07-28 the
		// request may reach again (through an endpoint).
		cl.Send(jsonrpc.Request([]byte(asked[i].id), r.Method, WithInputKey(r.Params, r.Key)))
	}
	responses := map[string]json.RawMessage{}
	for i, p := range asked {
		if answered[i] {
			continue
		}
		select {
		case result := <-p.ch:
			answered[i] = true
			if result != nil {
				responses[p.key] = result
			}
		case <-ctx.Done():
			// Withdraw what is still open (an elicitation dialog, say):
			// nothing will take its answer.
			for j, q := range asked {
				if !answered[j] {
					cl.Send(jsonrpc.Notification(protocol.NotificationCancelled,
						[]byte(`{"requestId":`+q.id+`,"reason":"mcpgate: the request it was for ended"}`)))
				}
			}
			return nil, ctx.Err()
		}
	}
	return marshalRaw(responses)
}

// declaredInputs returns the input methods a session may be asked for,
// from the clientCapabilities of its initialize (raw JSON).
func declaredInputs(caps json.RawMessage) map[string]bool {
	var c struct {
		Sampling    json.RawMessage `json:"sampling"`
		Elicitation json.RawMessage `json:"elicitation"`
		Roots       json.RawMessage `json:"roots"`
	}
	_ = json.Unmarshal(caps, &c)
	present := func(v json.RawMessage) bool { return len(v) > 0 && !bytes.Equal(v, []byte("null")) }
	return map[string]bool{
		protocol.MethodSamplingCreateMessage: present(c.Sampling),
		protocol.MethodElicitationCreate:     present(c.Elicitation),
		protocol.MethodRootsList:             present(c.Roots),
	}
}

// answered delivers the client's answer to one of the gateway's requests;
// an answer nobody waits for (late, unknown id) is dropped.
func (c *reverseConn) answered(msg *jsonrpc.Message) {
	c.mu.Lock()
	ch := c.waiting[string(msg.Bytes(msg.ID))]
	c.mu.Unlock()
	if ch == nil {
		return
	}
	var r struct {
		Result json.RawMessage `json:"result"`
	}
	if msg.IsError || json.Unmarshal(msg.Raw, &r) != nil || len(r.Result) == 0 || r.Result[0] != '{' {
		r.Result = nil
	}
	select {
	case ch <- bytes.Clone(r.Result):
	default: // answered twice: the first counts
	}
}

// withID returns reply with id in place of the one it has; false when
// reply is not one response (it was passed on as it was: a client would
// have got a message without its id, its request never answered).
func withID(reply, id []byte) ([]byte, bool) {
	parsed, err := jsonrpc.Parse(reply)
	if err != nil || parsed.Kind != jsonrpc.KindResponse {
		return nil, false
	}
	if bytes.Equal(parsed.Bytes(parsed.ID), id) {
		return reply, true
	}
	return jsonrpc.Splice(nil, reply, jsonrpc.Edit{Span: parsed.ID, Value: id}), true
}

func marshalRaw(m map[string]json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
