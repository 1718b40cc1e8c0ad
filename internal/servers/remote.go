package servers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// remoteServer is a remote server reached over Streamable HTTP ("type":
// "http"). A client session of the session eras gets an upstream session
// of its own (the embedded isolated). A request of the stateless revision
// (2026-07-28) goes to the remote as the client sent it, one POST each
// (remote.Stateless), when the remote speaks that revision: the first such
// request asks it with server/discover, and the verdict stands for the
// Server's life. A remote that does not speak it gets those requests
// translated (by front, as for a stdio server of the session eras)
// through upstream sessions the gateway initializes, one per set of client
// capabilities and another while one waits for a client's input, shared
// as shared mode does (translate.go); pinned to 2026-07-28
// ("protocol"), it gets them refused instead (400, -32022, naming the
// session versions), and so do its reverse-bridge sessions. A probe that fails without a verdict (the remote is
// unreachable, answers 5xx or 401, times out) fails the requests waiting
// for it; the next request after a backoff (1s, doubling up to 30s) probes
// again. One probe runs at a time; the requests arriving meanwhile wait for
// it. Remotes of the legacy transport ("type": "sse") are never probed:
// they are a plain isolated, whose stateless requests the HTTP front
// refuses itself. The sessions of the older eras, upstream and
// reverse-bridge ones alike, are portable: another replica of the gateway
// can resume them (portable.go).
type remoteServer struct {
	*isolated

	// Static after construction.
	name   string
	cfg    *config.Server
	client *remote.Stateless // with cfg.Headers; per principal: see clientFor
	// spawnUpstream starts an upstream session for a client session,
	// with the credential and handoff sink of ctx, carrying on with
	// resume when not nil (portable.go). (isolated's spawn is it with a
	// nil resume.)
	spawnUpstream func(ctx context.Context, resume *remote.Session) (*proc, error)
	timeout       time.Duration // bounds each request but a listen; 0: none
	// reverse: "protocol": "2026-07-28", so sessions of the older eras
	// are served by the reverse bridge (stateless requests each), not by
	// upstream sessions.
	reverse bool
	// trans holds the upstream sessions the stateless requests are
	// translated through when the remote does not speak the revision:
	// initialized by the gateway with the capabilities each request
	// declares, shared as in shared mode (translate.go, as for stdio).
	trans  *translation
	log    *slog.Logger
	ctx    context.Context    // every probe and request; ended by Close
	cancel context.CancelFunc // ends ctx
	// work counts the probe and the requests' goroutines; Add only under
	// mu while not closed, so that it comes before the Wait in Close.
	work     sync.WaitGroup
	inflight atomic.Int64 // stateless requests running, for Pending

	mu sync.Mutex
	// guarded by mu:
	closed   bool
	probing  chan struct{} // closed when the running probe ends; nil when none runs
	discover []byte        // the remote's discover result: it speaks the revision
	refusal  error         // why it does not (wraps remote.ErrNotModern): for good
	probeErr error         // the last probe's failure, which said nothing of the remote
	retryAt  time.Time     // no probe before then after a failure
	failures int           // probes failed in a row
}

// Probe backoff after a failure without a verdict.
const (
	minProbeBackoff = time.Second
	maxProbeBackoff = 30 * time.Second
)

// newRemote wraps iso, the isolated server of remote server cfg, with the
// stateless path. It takes iso over: it closes it on error.
func newRemote(cfg *config.Server, iso *isolated, spawn func(context.Context, *remote.Session) (*proc, error), sharedOpts mux.Options, log *slog.Logger) (*remoteServer, error) {
	client, err := remote.NewStateless(remote.Config{
		Name: cfg.Name, URL: cfg.URL, Transport: remote.TransportHTTP, Headers: cfg.Headers, Logger: log,
	})
	if err != nil {
		iso.Close()
		return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	s := &remoteServer{isolated: iso, name: cfg.Name, cfg: cfg, client: client, spawnUpstream: spawn, timeout: cfg.Timeout, log: log,
		reverse: cfg.Protocol == config.ProtocolModern,
		trans:   newTranslation(cfg, sharedOpts, log)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Open opens a session of the older eras: an upstream session of its own,
// or, pinned to 2026-07-28, a session of the reverse bridge (whose
// requests carry the credential of ctx's principal). Either is portable:
// with a handoff sink in ctx, Open gives it the session's state before it
// returns, and again as the session initializes (portable.go).
func (s *remoteServer) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	var c conn.Conn
	var err error
	kind := kindUpstream
	if s.reverse {
		kind = kindReverse
		c, err = s.openReverse(ctx, general, nil)
	} else {
		c, err = s.isolated.Open(ctx, general)
	}
	if err != nil {
		return nil, err
	}
	if sink := conn.Handoff(ctx); sink != nil {
		sink(handoffState{kind: kind}.encode()) // not initialized yet
	}
	return c, nil
}

// statelessOpener is OpenStateless's signature.
type statelessOpener = func(ctx context.Context, general conn.Stream, version string, caps []byte) (conn.StatelessConn, error)

// bindStateless returns OpenStateless bound to the credential of ctx's
// principal, for connections opened later with contexts that carry no
// principal (the reverse bridge's). A principal without one is refused
// here.
func (s *remoteServer) bindStateless(ctx context.Context) (statelessOpener, error) {
	cred, err := credentialFor(ctx, s.cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, general conn.Stream, version string, caps []byte) (conn.StatelessConn, error) {
		return toStateless(s.openStateless(ctx, general, version, caps, cred))
	}, nil
}

// OpenStateless opens the connection of one stateless request. The first
// call probes the remote (bounded by ctx here, by the probe's own timeout
// for the probe itself, which the requests arriving meanwhile share).
func (s *remoteServer) OpenStateless(ctx context.Context, general conn.Stream, version string, caps []byte) (conn.StatelessConn, error) {
	cred, err := credentialFor(ctx, s.cfg)
	if err != nil {
		return conn.StatelessConn{}, err
	}
	return toStateless(s.openStateless(ctx, general, version, caps, cred))
}

// ServesStateless is true: an "http" remote serves stateless requests,
// itself, translated or refused with the versions it speaks. (An "sse"
// remote is a plain isolated, which serves sessions only.)
func (s *remoteServer) ServesStateless() bool { return true }

// clientFor returns the Stateless sending cred's headers.
func (s *remoteServer) clientFor(cred credential) (*remote.Stateless, error) {
	if cred.key == "" {
		return s.client, nil
	}
	return s.client.WithHeaders(cred.headers)
}

// openStateless is OpenStateless for credential cred. A probe started
// here carries cred: its verdict is about the server, and stands for
// every principal.
func (s *remoteServer) openStateless(ctx context.Context, general conn.Stream, version string, caps []byte, cred credential) (statelessConn, error) {
	client, err := s.clientFor(cred)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", s.name, err)
	}
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, errClosed
		case s.discover != nil:
			d := s.discover
			s.mu.Unlock()
			return &remoteConn{s: s, client: client, discover: d}, nil
		case s.refusal != nil && s.reverse:
			// Pinned to 2026-07-28 (the reverse bridge's sessions come
			// here too), yet the remote speaks the older eras: say so.
			s.mu.Unlock()
			return &refusedConn{name: s.name, version: version}, nil
		case s.refusal != nil:
			// Translated, as for a stdio server of the session eras,
			// through upstream sessions the gateway initializes (on first
			// use; a remote client dials lazily).
			s.mu.Unlock()
			return s.trans.open(general, version, caps, cred)
		case s.probing == nil && time.Now().Before(s.retryAt):
			err := s.probeErr
			s.mu.Unlock()
			return nil, err
		case s.probing == nil:
			s.probing = make(chan struct{})
			s.work.Add(1)
			go s.probe(s.probing, client)
		}
		wait := s.probing
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// probe asks the remote (through client) whether it speaks the stateless
// revision, records the answer and closes done.
func (s *remoteServer) probe(done chan struct{}, client *remote.Stateless) {
	defer s.work.Done()
	defer close(done)
	result, err := client.Discover(s.ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probing = nil
	switch {
	case s.closed:
	case err == nil:
		s.discover = result
		s.log.Info("remote server speaks "+protocol.StatelessVersion+"; its stateless requests go to it directly", "server", s.name)
	case errors.Is(err, remote.ErrNotModern):
		s.refusal = err
		s.log.Info("remote server does not speak "+protocol.StatelessVersion+"; its stateless requests are translated", "server", s.name, "reason", err)
	default:
		s.probeErr = err
		d := maxProbeBackoff
		if s.failures < 6 {
			d = min(minProbeBackoff<<s.failures, maxProbeBackoff)
		}
		s.failures++
		s.retryAt = time.Now().Add(d)
		s.log.Warn("probing the remote server for "+protocol.StatelessVersion+" failed", "server", s.name, "err", err, "retry_in", d)
	}
}

// Pending counts the upstream sessions' requests and the stateless ones.
func (s *remoteServer) Pending() int {
	return s.isolated.Pending() + int(s.inflight.Load()) + s.trans.pending()
}

// Close ends the probe and every stateless request (those not answered yet
// get an error), waits for their goroutines, then closes the upstream
// sessions.
func (s *remoteServer) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.work.Wait()
	s.client.Close()
	s.trans.close()
	s.isolated.Close()
}

// remoteConn is the connection of one stateless request to a remote that
// speaks the revision: its messages go up as they came (ids included: each
// request has its own POST, so they cannot collide), and what comes back on
// the POST's response is its answer. Handle starts a goroutine per request,
// owned by the remoteServer (Close waits for it); Close and Abandon cancel
// requests without waiting for anything.
type remoteConn struct {
	s        *remoteServer
	client   *remote.Stateless // s.client, or one with a principal's headers
	discover []byte            // the remote's discover result

	calls conn.Calls[struct{}] // requests not answered; closed by CloseWith
}

// errConnClosed answers a request handed to a closed remoteConn.
var errConnClosed = errors.New("mcpgate: session closed")

// paramHeaders returns the Mcp-Param-* headers of h (the server checks
// them against the tool's arguments), or nil.
func paramHeaders(h http.Header) http.Header {
	var out http.Header
	for k, vs := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Mcp-Param-") {
			if out == nil {
				out = http.Header{}
			}
			out[k] = vs
		}
	}
	return out
}

// Handle sends request msg to the remote, bounded by the server's timeout
// (but a subscriptions/listen, which lasts until one side ends it); ending
// ctx cancels it, as Abandon does. Messages that are not requests are
// dropped: the revision has no client notifications over HTTP, and its
// clients never answer the server.
func (c *remoteConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind != jsonrpc.KindRequest {
		return
	}
	s := c.s
	id := bytes.Clone(msg.Bytes(msg.ID))
	header := paramHeaders(conn.RequestHeader(ctx)) // the client's Mcp-Param-* headers
	callCtx, cancel := context.WithCancel(s.ctx)
	cl := &conn.Call[struct{}]{ID: id, Out: out, Cancel: cancel} // Cancel closes its POST
	raw := bytes.Clone(msg.Raw)
	listen := msg.MethodIs(protocol.MethodSubscriptionsListen)
	var refused error
	s.mu.Lock()
	if s.closed {
		refused = errClosed
	} else {
		s.work.Add(1)
	}
	s.mu.Unlock()
	if refused == nil && !c.calls.Add(cl) {
		s.work.Done()
		refused = errConnClosed
	}
	if refused != nil {
		cancel()
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, refused.Error()))
		return
	}
	s.inflight.Add(1)
	go c.run(ctx, callCtx, cl, raw, header, listen)
}

// run carries one request: reqCtx ends with the client's (Handle's ctx).
func (c *remoteConn) run(reqCtx, ctx context.Context, cl *conn.Call[struct{}], msg []byte, header http.Header, listen bool) {
	s := c.s
	defer s.work.Done()
	defer s.inflight.Add(-1)
	defer cl.Cancel()
	stop := context.AfterFunc(reqCtx, cl.Cancel)
	defer stop()
	if !listen && s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	c.client.Do(ctx, msg, header, cl.Send, func(msg []byte) { cl.Reply(msg) })
	// Without an answer from Do, the request was cancelled: by its client
	// (Reply(nil) says so), by Abandon or Close (which settled it), or by
	// the Server closing. An answer given already wins (the table).
	if s.ctx.Err() != nil {
		cl.Fail(protocol.CodeServerError, errClosed.Error())
	}
	cl.Reply(nil)
}

// Version is the revision's: the connection has no session to negotiate.
func (c *remoteConn) Version() string { return protocol.StatelessVersion }

// Abandon cancels the requests whose answers were to go to out, without
// answering them: their client left.
func (c *remoteConn) Abandon(out conn.Stream) { c.calls.Abandon(out) }

// Close answers every request still running with an error and cancels it.
func (c *remoteConn) Close() { c.CloseWith("") }

// CloseWith is Close telling the requests why ("mcpgate: " + reason).
func (c *remoteConn) CloseWith(reason string) {
	text := errConnClosed.Error()
	if reason != "" {
		text = "mcpgate: " + reason
	}
	c.calls.Close(protocol.CodeServerError, text)
}

// ServerInit returns the remote's discover result.
func (c *remoteConn) ServerInit(context.Context) ([]byte, error) { return c.discover, nil }

// Passthrough is true: the remote answers everything itself.
func (c *remoteConn) Passthrough() bool { return true }

// refusedConn is the connection of a stateless request to a remote that
// does not speak the revision: every request gets the error the HTTP front
// gives a server with a process per session (-32022, which it sends with
// status 400, data naming the session versions), so that a client falls
// back to initialize. It is a passthrough connection so that the front
// adds nothing of its own (no translation, no discover built from an
// initialize result that does not exist).
type refusedConn struct {
	name    string
	version string // the version the request asked for
}

func (c *refusedConn) Handle(_ context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind != jsonrpc.KindRequest {
		return
	}
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{protocol.SessionVersions, c.version})
	body := jsonrpc.ErrorResponse(msg.Bytes(msg.ID), protocol.CodeUnsupportedVersion,
		"mcpgate: remote server "+c.name+" does not speak protocol version "+protocol.StatelessVersion+"; initialize a session")
	// {"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M}} gets
	// ,"data":D before its two closing braces.
	body = append(append(append(body[:len(body)-2:len(body)-2], `,"data":`...), data...), "}}"...)
	out.Reply(body)
}

func (c *refusedConn) Version() string     { return c.version }
func (c *refusedConn) Abandon(conn.Stream) {}
func (c *refusedConn) Close()              {}
func (c *refusedConn) CloseWith(string)    {}
func (c *refusedConn) Passthrough() bool   { return true }
func (c *refusedConn) ServerInit(context.Context) ([]byte, error) {
	return nil, errors.New("mcpgate: remote server " + c.name + " does not speak protocol version " + protocol.StatelessVersion)
}

// Interface guards.
var (
	_ Server        = (*remoteServer)(nil)
	_ statelessConn = (*remoteConn)(nil)
	_ statelessConn = (*refusedConn)(nil)
)
