package eras

import (
	"bytes"
	"context"
	"net/http"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is where a stateless request meets its connection: what the
// front must do with it (Route), and sending it on (Serve), as it came to
// a server that speaks the revision (a passthrough connection) or
// translated for one of the session eras. The front writes what comes
// back; it never asks what the server speaks.

// Route is what the front does with a stateless request besides sending
// it on: the transport each needs differs.
type Route int

const (
	// RouteCall: Serve it; its answers come on the stream given.
	RouteCall Route = iota
	// RouteResume: the retry of a request parked for input; Unpark it
	// and Resume on the stream of the parked request's record.
	RouteResume
	// RouteDiscover: server/discover answered from the server's
	// initialize result (DiscoverResult).
	RouteDiscover
	// RouteListen: subscriptions/listen served by the gateway
	// (OpenListen).
	RouteListen
)

// Route tells what request msg (checked: req) on sc needs. A passthrough
// server answers everything itself.
func (p *Parking[S]) Route(sc conn.StatelessConn, msg *jsonrpc.Message, req Request) Route {
	switch {
	case sc.Passthrough():
		return RouteCall
	case inputMethods[req.Method] && isRetry(msg) && p.sealedRetry(msg):
		// The retry of a request that got input_required goes on where
		// that request was parked (this request's own record ends).
		return RouteResume
	case req.Method == "server/discover":
		return RouteDiscover
	case req.Method == "subscriptions/listen":
		return RouteListen
	}
	return RouteCall
}

// Serve sends request msg (checked: req) from origin on sc and returns the
// Exchange its answers come through, onto st. A passthrough server gets
// it as it came (its requestState opened first when bound), with the
// POST's headers; one of the session eras gets it translated. A refusal
// before anything was sent is a Problem.
func (p *Parking[S]) Serve(ctx context.Context, sc conn.StatelessConn, msg *jsonrpc.Message, req Request, origin Origin[S], st conn.Stream) (*Exchange[S], *Problem) {
	if sc.Passthrough() {
		x := &Exchange[S]{p: p, conn: sc, origin: origin, st: st, method: req.Method, pass: true}
		if origin.Bind {
			// The server's requestState is bound to the principal
			// (passstate.go).
			bound, ok := p.unsealRetry(msg, origin.Target, origin.Owner)
			if !ok {
				return nil, invalid(errBadState.Error())
			}
			msg, x.seal = bound, true
		}
		sc.Handle(conn.WithRequestHeader(ctx, origin.Header), msg, x)
		return x, nil
	}
	up, err := Upstream(sc, msg)
	if err != nil { // cannot happen: ToSessionEra keeps a valid message valid
		return nil, &Problem{Status: http.StatusInternalServerError, Code: protocol.CodeInternalError, Message: "mcpgate: " + err.Error()}
	}
	id := bytes.Clone(msg.Bytes(msg.ID))
	token := bytes.Clone(msg.Bytes(msg.ProgressToken))
	x := &Exchange[S]{p: p, conn: sc, origin: origin, st: st, method: req.Method, logs: req.LogLevel != "",
		id: id, first: id, token: token, curToken: token, mrtr: inputMethods[req.Method]}
	if x.mrtr {
		x.request = msg.Raw // its digest is taken if it is parked (park)
	}
	sc.Handle(ctx, &up, x)
	return x, nil
}

// Upstream returns stateless request msg as the server of sc takes it: as
// it came when the server speaks the revision, translated (ToSessionEra) for
// one of the session eras.
func Upstream(sc conn.StatelessConn, msg *jsonrpc.Message) (jsonrpc.Message, error) {
	if sc.Passthrough() {
		return *msg, nil
	}
	return jsonrpc.Parse(ToSessionEra(nil, msg))
}

// DiscoverResult is the result of server/discover on sc, a connection to
// a server of the session eras: its initialize result as the revision
// has it, offering versions and without the capabilities unserved.
func DiscoverResult(ctx context.Context, sc conn.StatelessConn, versions, unserved []string) ([]byte, *Problem) {
	init, err := sc.ServerInit(ctx)
	if err != nil {
		return nil, &Problem{Status: http.StatusServiceUnavailable, Code: protocol.CodeServerError, Message: err.Error()}
	}
	result, err := Discover(init, versions, unserved)
	if err != nil {
		return nil, &Problem{Status: http.StatusBadGateway, Code: protocol.CodeInternalError, Message: "mcpgate: the server's initialize result: " + err.Error()}
	}
	return result, nil
}
