package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/modern"
)

// run carries one request of a reverse session to its final answer: a
// stateless request per round, the client asked for what an input_required
// result needs between rounds.
func (c *reverseConn) run(ctx context.Context, cl *reverseCall, raw []byte, meta map[string]json.RawMessage) {
	defer c.forget(cl)
	msg, err := jsonrpc.Parse(raw)
	if err != nil { // it parsed once: cannot happen
		cl.fail(jsonrpc.CodeInternalError, "mcpgate: "+err.Error())
		return
	}
	var extra map[string]json.RawMessage // the retry's inputResponses and requestState
	for round := 0; ; round++ {
		id := cl.id
		if round > 0 {
			id = c.nextID("retry") // the revision: a retry is a new request
		}
		req, err := modern.BridgeRequest(&msg, id, meta, extra)
		if err != nil {
			cl.fail(jsonrpc.CodeInvalidParams, "mcpgate: "+err.Error())
			return
		}
		reply, err := c.roundTrip(ctx, cl, req)
		if err != nil {
			c.settle(ctx, cl, err)
			return
		}
		ir, ok, err := modern.ParseInputRequired(reply)
		switch {
		case !ok:
			cl.reply(withID(reply, cl.id))
			return
		case err != nil:
			cl.fail(jsonrpc.CodeInternalError, "mcpgate: the server's answer: "+err.Error())
			return
		case round+1 >= reverseRounds:
			cl.fail(jsonrpc.CodeInternalError, fmt.Sprintf("mcpgate: the server still asked for input after %d rounds", reverseRounds))
			return
		}
		responses, err := c.askClient(ctx, cl, ir.Requests)
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
func (c *reverseConn) settle(ctx context.Context, cl *reverseCall, err error) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		cl.fail(jsonrpc.CodeServerError, fmt.Sprintf("mcpgate: request timed out after %v", c.timeout))
	case c.ctx.Err() != nil:
		cl.fail(jsonrpc.CodeServerError, errReverseClosed.Error())
	default:
		cl.fail(jsonrpc.CodeServerError, err.Error())
	}
}

// roundTrip sends req as a stateless request and returns the server's
// final answer; the messages before it (progress, log messages) go to the
// client's stream as they come.
func (c *reverseConn) roundTrip(ctx context.Context, cl *reverseCall, req []byte) ([]byte, error) {
	sc, err := c.open(ctx, c.general)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	msg, err := jsonrpc.Parse(req)
	if err != nil {
		return nil, err
	}
	rs := &replyStream{send: cl.send, final: make(chan []byte, 1)}
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
func (c *reverseConn) askClient(ctx context.Context, cl *reverseCall, reqs []modern.InputRequest) (json.RawMessage, error) {
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
	for i, r := range reqs {
		cl.send(jsonrpc.Request([]byte(asked[i].id), r.Method, r.Params))
	}
	responses := map[string]json.RawMessage{}
	for _, p := range asked {
		select {
		case result := <-p.ch:
			if result != nil {
				responses[p.key] = result
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return marshalRaw(responses)
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

// withID returns reply with id in place of the one it has.
func withID(reply, id []byte) []byte {
	parsed, err := jsonrpc.Parse(reply)
	if err != nil || bytes.Equal(parsed.Bytes(parsed.ID), id) {
		return reply
	}
	return jsonrpc.Splice(nil, reply, jsonrpc.Edit{Span: parsed.ID, Value: id})
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
