// Package gateway wires a config into a running gateway: one backend per
// configured server, the HTTP front, the listener, and the shutdown order.
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

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/httpapi"
)

// Version is the gateway's version, reported to servers as clientInfo.
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
	Handler *httpapi.Handler
	servers map[string]backend.Server
}

// Start starts every configured server (all or none) and builds the HTTP
// handler.
func Start(cfg *config.Config, log *slog.Logger) (*Gateway, error) {
	g := &Gateway{cfg: cfg, log: log, servers: map[string]backend.Server{}}
	backends := map[string]httpapi.Backend{}
	for _, name := range cfg.Names() {
		s, err := backend.New(cfg.Servers[name], Version, log)
		if err != nil {
			g.stopServers()
			return nil, err
		}
		g.servers[name] = s
		backends[name] = s
	}
	gw := cfg.Gateway
	g.Handler = httpapi.New(httpapi.Config{
		Backends: backends, OriginAllowed: gw.OriginAllowed, MaxBodyBytes: gw.MaxBodyBytes,
		KeepAlive: gw.KeepAliveInterval, MaxSessions: gw.MaxSessions, IdleTimeout: gw.SessionIdleTimeout,
		SweepInterval: gw.SessionSweepInterval, ReplayEvents: gw.SSEReplayEvents, Logger: log,
		HostDomain: gw.HostRouting.Domain, TrustProxyHeaders: gw.TrustProxyHeaders,
	})
	return g, nil
}

func (g *Gateway) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: g.Handler, ReadHeaderTimeout: 10 * time.Second}
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { g.Handler.Run(sweepCtx) })

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	g.log.Info("listening", "addr", ln.Addr().String(), "servers", len(g.servers))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	g.log.Info("shutting down", "drain_timeout", g.cfg.Gateway.DrainTimeout)
	g.Handler.Drain()
	drainCtx, cancel := context.WithTimeout(context.Background(), g.cfg.Gateway.DrainTimeout)
	if err := srv.Shutdown(drainCtx); err != nil {
		g.log.Warn("drain timeout: closing the requests still in flight", "err", err)
	}
	cancel()
	g.Handler.Close()
	_ = srv.Close()
	if serveErr == nil {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	stopSweep()
	wg.Wait()
	g.stopServers()
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
