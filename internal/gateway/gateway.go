// Package gateway wires a config into a running gateway: one servers.Server
// per configured server, one aggregate.Endpoint per configured endpoint (on
// the servers), the key ring (internal/seal), the HTTP front, the listener,
// hot reload, and the shutdown order.
//
// Shutdown always ends within drainTimeout + a bounded stop time: Drain
// (no new work), http.Server.Shutdown bounded by drainTimeout (requests in
// flight finish), Handler.Close (the rest are answered with errors, its
// handlers waited for briefly), http.Server.Close (connections cut), then
// every endpoint closed (their sessions of the servers end), then every
// server stopped in parallel, each of its processes in parallel (at most
// 2*servers.StopGrace each).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/aggregate"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/authserver"
	"github.com/mcpgate/mcpgate/internal/cluster"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/logfile"
	"github.com/mcpgate/mcpgate/internal/policy"
	"github.com/mcpgate/mcpgate/internal/seal"
	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/tracing"
)

// Version is the gateway's version, reported to servers as
// clientInfo.version. cmd/mcpgate sets it from its build-time version
// before calling Run; the default is the module version, or "dev".
var Version = moduleVersion()

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Run starts every configured server, serves HTTP on cfg.Gateway.Listen
// until ctx ends, then shuts down: stop accepting, let requests in flight
// finish up to the drain timeout, close streams, stop every child process.
// It returns nil after a clean shutdown.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", cfg.Gateway.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Gateway.Listen, err)
	}
	return Serve(ctx, ln, cfg, log)
}

// Serve is Run on a listener the caller made (tests listen on port 0).
func Serve(ctx context.Context, ln net.Listener, cfg *config.Config, log *slog.Logger) error {
	g, err := Start(cfg, log)
	if err != nil {
		ln.Close()
		return err
	}
	return g.serve(ctx, ln)
}

// Gateway is a started set of servers behind one HTTP handler.
type Gateway struct {
	cfg     *config.Config
	log     *slog.Logger
	Handler *front.Handler
	servers map[string]servers.Server
	// endpoints are built on the servers: closed before them.
	endpoints map[string]*aggregate.Endpoint
	// auth authenticates the handler's requests (nil: none; auth.go).
	auth auth.Authenticator
	// policies are the servers' and endpoints' compiled policies.
	policies policy.Set
	// closeAudit writes the audit lines queued and closes the audit log
	// (audit.go); a no-op without one.
	closeAudit func()
	auditFile  *logfile.File // the audit log's file, reopened on SIGHUP; nil: none (audit.go)
	// rl serializes reloads, which swap cfg, servers, endpoints, auth and
	// policies (reload.go).
	rl      reloader
	certs   *certReloader     // gateway.tls's; nil: plain HTTP (tls.go)
	admin   *adminServer      // gateway.admin.listen's; nil: none (admin.go)
	tracing *tracing.Provider // nil: tracing off (tracing.go)
	// ring seals the front's requestStates; its keys are swapped by a
	// reload (seal.go).
	ring *seal.Ring
	// cluster is this replica among the others (cluster.go); nil: one
	// replica.
	cluster *cluster.Cluster
	// authServer is gateway.auth.server's, authStore its records
	// (authserver.go); nil: none. The admin API lists and revokes its
	// clients and grants (admin.go).
	authServer *authserver.Server
	authStore  authserver.Store
	// own is the gate's issuer entry for authServer: each gate a reload
	// builds trusts the same server.
	own *ownIssuer
}

// Start starts every configured server (all or none), builds every
// endpoint on them and the HTTP handler. A server whose command cannot be
// started is served anyway (its clients get an error naming the cause
// while it is retried) and logged as a warning, unless it is critical:
// then Start starts nothing and returns an error naming every such server
// and its cause. An endpoint the aggregate refuses stops the servers and
// is returned as the error. So is a gateway.auth block that cannot be
// served (auth.go).
func Start(cfg *config.Config, log *slog.Logger) (*Gateway, error) {
	own := &ownIssuer{}
	a, err := newAuthenticator(cfg, log, own)
	if err != nil {
		return nil, err
	}
	g, err := startOwn(cfg, log, a, own)
	if err != nil {
		closeAuth(a)
	}
	return g, err
}

// start is Start with Authenticator a (nil: none).
func start(cfg *config.Config, log *slog.Logger, a auth.Authenticator) (*Gateway, error) {
	return startOwn(cfg, log, a, &ownIssuer{})
}

// startOwn is start with own, the entry of a's gate for the gateway's
// authorization server, pointed at it once it is built (authserver.go).
func startOwn(cfg *config.Config, log *slog.Logger, a auth.Authenticator, own *ownIssuer) (*Gateway, error) {
	pols, err := policy.FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	var certs *certReloader
	if cfg.Gateway.TLS != nil {
		if certs, err = newCertReloader(cfg.Gateway.TLS, log); err != nil {
			return nil, err
		}
	}
	problems := CheckCommands(cfg)
	if err := checkCritical(problems); err != nil {
		return nil, err
	}
	ring, err := newRing(cfg, log) // seal.go
	if err != nil {
		return nil, err
	}
	cl, err := newCluster(cfg, log) // cluster.go
	if err != nil {
		return nil, err
	}
	for _, p := range problems {
		log.Warn("server cannot start; serving it with errors and retrying", "server", p.Server, "err", p.Err)
	}
	g := &Gateway{cfg: cfg, log: log, servers: map[string]servers.Server{}, endpoints: map[string]*aggregate.Endpoint{}, auth: a, policies: pols, certs: certs, ring: ring, cluster: cl, own: own}
	backends := map[string]conn.Backend{}
	for _, name := range cfg.Names() {
		s, err := servers.New(cfg.Servers[name], Version, log)
		if err != nil {
			g.stopServers()
			return nil, err
		}
		g.servers[name] = s
		backends[name] = s
	}
	endpoints, err := g.startEndpoints()
	if err != nil {
		g.stopServers()
		return nil, err
	}
	hc := handlerConfig(cfg, backends, log)
	if hc.Audit, g.auditFile, g.closeAudit, err = openAudit(cfg.Gateway.Audit, log); err != nil {
		g.closeEndpoints()
		g.stopServers()
		return nil, err
	}
	hc.Endpoints = endpoints
	hc.Probes = g.probes()
	g.setupMetrics(&hc) // metrics.go
	hc.Auth = a
	hc.Seal = ring
	hc.Policies = handlerPolicies(pols)
	if err := g.startAuthServer(cfg, ring, cl, own); err != nil { // authserver.go
		g.closeAudit()
		g.closeEndpoints()
		g.stopServers()
		return nil, err
	}
	ah := g.newAdmin() // admin.go
	hc.Admin = mainAdmin(ah, cfg.Gateway.Admin.ListenAddr())
	hc.Tracer = g.startTracing() // tracing.go
	useCluster(&hc, cfg, cl)     // cluster.go
	g.Handler = front.New(hc)
	if cl != nil {
		cl.OnRevoke(g.Handler.Revoked)
		cl.OnStateChange(g.Handler.StateChanged) // newer states for the sessions held
		cl.OnSubscribed(g.Handler.Resync)
	}
	if err := g.listenAdmin(ah); err != nil {
		g.closeAuthStore()
		g.stopTracing()
		g.closeAudit()
		g.closeEndpoints()
		g.stopServers()
		return nil, err
	}
	return g, nil
}

// handlerConfig maps the gateway block onto the HTTP front's settings.
func handlerConfig(cfg *config.Config, backends map[string]conn.Backend, log *slog.Logger) front.Config {
	gw := cfg.Gateway
	replayEvents := gw.SSEReplayEvents
	if replayEvents == 0 {
		replayEvents = -1 // the config's 0 disables replay; front's 0 means its default
	}
	return front.Config{
		Backends: backends, OriginAllowed: gw.OriginAllowed, MaxBodyBytes: gw.MaxBodyBytes,
		KeepAlive: gw.KeepAliveInterval, MaxSessions: gw.MaxSessions, IdleTimeout: gw.SessionIdleTimeout,
		SweepInterval: gw.SessionSweepInterval, ReplayEvents: replayEvents, Logger: log,
		HostDomain: gw.HostRouting.Domain, TrustProxyHeaders: gw.TrustProxyHeaders,
		HostAllowed:     hostCheck(gw.Listen, gw.AllowedHosts, gw.HostRouting.Domain, publicURL(gw)),
		BodyReadTimeout: gw.BodyReadTimeout, ReplyWait: gw.ReplyWait, InputWait: gw.InputWait,
		ReplayBytes: gw.SSEReplayBytes, SessionReplayBytes: gw.SessionReplayBytes,
		PublicURL: publicURL(gw), Limits: limitsOf(gw.Limits), BareServer: cfg.BareServer,
	}
}

// answerGrace bounds how long shutdown lets the error answers written by
// Handler.Close leave before it closes every connection.
const answerGrace = time.Second

// serve serves HTTP on ln until ctx ends, then shuts down in the order of
// the package comment.
func (g *Gateway) serve(ctx context.Context, ln net.Listener) error {
	// Under the reload lock: a reload may come as soon as the watcher
	// runs. The keys read here need a restart to change anyway.
	cfg, _, _ := g.current()
	gw := cfg.Gateway
	ln = newLimitListener(ln, gw.MaxConnections)
	if gw.IdleTimeout > 0 {
		ln = newFirstByteListener(ln, gw.IdleTimeout) // listener.go
	}
	srv := &http.Server{
		Handler:           g.traceHTTP(g.withAuthServer(g.Handler)), // tracing.go, authserver.go
		ReadHeaderTimeout: gw.HeaderTimeout,
		IdleTimeout:       gw.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { g.Handler.Run(sweepCtx) })
	if g.cluster != nil {
		wg.Go(func() { g.cluster.Run(sweepCtx) }) // heartbeats and revocations, until the front is closed
	}

	errc := make(chan error, 1)
	serveHTTP := g.serveHTTP(srv, ln) // tls.go
	go func() { errc <- serveHTTP() }()
	stopAdmin := g.serveAdmin() // admin.go
	g.rl.locked(func() {        // a reload may come at once (reload.go)
		g.log.Info("listening", "addr", ln.Addr().String(), "tls", g.certs != nil, "servers", len(g.servers), "endpoints", len(g.endpoints), "version", Version)
		g.logEndpoints()
		g.logAuth(ln.Addr().String())
	})

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	g.rl.stop() // no reload after this: what follows reads the servers
	g.log.Info("shutting down", "drain_timeout", gw.DrainTimeout)
	g.Handler.Drain()
	drainCtx, cancel := context.WithTimeout(context.Background(), gw.DrainTimeout)
	g.storeHandoffs(drainCtx, gw.DrainTimeout/4) // cluster.go
	g.holdOwned(gw.DrainTimeout * 3 / 4)         // cluster.go; the last quarter finishes the requests in flight
	if err := srv.Shutdown(drainCtx); err != nil {
		servers, endpoints := g.pending()
		g.log.Warn("drain timeout: closing the requests still in flight", "err", err,
			"pending_servers", servers, "pending_endpoints", endpoints)
	}
	cancel()
	g.Handler.Close()
	// Close answered the requests still in flight and waited for their
	// handlers, but a handler's last write leaves with the end of its
	// response, after the handler returned: shut down once more, briefly,
	// so those connections finish their responses and go idle before the
	// rest are cut.
	answerCtx, cancel := context.WithTimeout(context.Background(), answerGrace)
	_ = srv.Shutdown(answerCtx)
	cancel()
	_ = srv.Close()
	stopAdmin()
	if serveErr == nil {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	stopSweep()
	wg.Wait()
	g.closeAuthStore() // authserver.go; before the cluster closes the Redis client it may use
	if g.cluster != nil {
		_ = g.cluster.Close()
	}
	closeAuth(g.auth) // no request is served any more
	g.closeAudit()
	g.closeEndpoints()
	g.stopServers()
	g.stopTracing() // last: the spans of every answer are sent (tracing.go)
	g.log.Info("stopped")
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// stopServers stops every server's processes, in parallel.
func (g *Gateway) stopServers() {
	var wg sync.WaitGroup
	for _, s := range g.servers {
		wg.Go(s.Close)
	}
	wg.Wait()
}

// KillAll sends SIGKILL to every server process group the gateway started
// and has not reaped, without waiting; it returns how many it signalled.
// It is for a gateway that must exit at once (a second signal).
func KillAll() int { return servers.KillAll() }
