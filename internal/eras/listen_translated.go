package eras

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file serves subscriptions/listen of a stateless client for a server
// of the session eras, which does not know it: the gateway acknowledges
// the subscription itself (with the part of the filter the server's
// capabilities can honour), subscribes to the resources it names
// (resources/subscribe, counted per URI across clients by the
// multiplexer), and forwards the server's list_changed and
// resources/updated notifications that match, each tagged with the
// subscription's id, until the client closes the stream or the gateway
// shuts down (then the listen gets its final result). The front writes
// the stream (the notifications come on the connection's general stream);
// this file decides what goes on it.

// TranslatedListen is one such listen.
type TranslatedListen struct {
	id     []byte // the listen request's, byte for byte
	agreed Filter // what the acknowledgement says: what the client gets
}

// OpenListen answers listen request msg on sc, a connection to a server of
// the session eras: it reads the filter, agrees it with the server's
// capabilities and subscribes to its resources upstream (a URI the server
// refuses is left out). A refusal is a Problem with its HTTP status.
func OpenListen(ctx context.Context, sc conn.StatelessConn, msg *jsonrpc.Message) (*TranslatedListen, *Problem) {
	want, ok := RequestedFilter(msg.Raw)
	if !ok {
		return nil, &Problem{Status: http.StatusBadRequest, Code: protocol.CodeInvalidParams, Message: "mcpgate: subscriptions/listen needs params.notifications (an object)"}
	}
	init, err := sc.ServerInit(ctx)
	if err != nil {
		return nil, &Problem{Status: http.StatusServiceUnavailable, Code: protocol.CodeServerError, Message: err.Error()}
	}
	f := want.Agreed(init)
	// Over a copy: deleting from f.URIs shifts (and clears) the array
	// being ranged over, which would skip the URI after a refused one.
	for _, uri := range slices.Clone(f.URIs) {
		if !subscribe(ctx, sc, uri) {
			f.URIs = slices.DeleteFunc(f.URIs, func(u string) bool { return u == uri })
		}
	}
	return &TranslatedListen{id: msg.Bytes(msg.ID), agreed: f}, nil
}

// Ack is the listen's acknowledgement, its first message.
func (l *TranslatedListen) Ack() []byte { return AckMessage(l.id, l.agreed) }

// Forward returns what the client gets of data, a message of the
// connection's general stream: a notification the listen wants, tagged
// with its id; false for anything else.
func (l *TranslatedListen) Forward(data []byte) ([]byte, bool) {
	m, err := jsonrpc.Parse(data)
	if err != nil || m.Kind != jsonrpc.KindNotification || !l.agreed.WantsMessage(&m) {
		return nil, false
	}
	return Tag(data, l.id), true
}

// End is the final result of a listen the gateway ends (it shuts down).
func (l *TranslatedListen) End() []byte { return EndMessage(l.id) }

// subscribe subscribes sc to resource uri upstream and reports whether
// the server agreed.
func subscribe(ctx context.Context, sc conn.StatelessConn, uri string) bool {
	q, _ := json.Marshal(uri)
	req, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"mcpgate-listen","method":"resources/subscribe","params":{"uri":` + string(q) + `}}`))
	if err != nil {
		return false
	}
	rs := &replyStream{send: func([]byte) {}, final: make(chan []byte, 1)}
	sc.Handle(ctx, &req, rs)
	select {
	case reply := <-rs.final:
		if reply == nil {
			return false
		}
		m, err := jsonrpc.Parse(reply)
		return err == nil && !m.IsError
	case <-ctx.Done():
		return false
	}
}
