package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/authserver"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/servers"
)

// This file wires gateway.admin: an admin.Handler over the gateway (its
// servers as of the last reload, the HTTP front's sessions, the clients
// and grants of its authorization server when it has one) served on the
// main listener (front.Config.Admin), or, with gateway.admin.listen, on a
// listener of its own that listenAdmin opens at start and serveAdmin
// serves: it is shut down with the main one (serve) and never outlives it.
// The admin block itself is read at start; a reload does not change it.

// newAdmin returns the admin handler, or nil without gateway.admin.
func (g *Gateway) newAdmin() *admin.Handler {
	a := g.cfg.Gateway.Admin
	if a == nil {
		return nil
	}
	ac := admin.Config{
		Source: adminSource{g}, Token: a.Token, Scopes: a.Scopes, Version: Version,
		TrustProxyHeaders: g.cfg.Gateway.TrustProxyHeaders,
		Logger:            g.log.With("component", "admin"),
	}
	if g.authServer != nil {
		// Set only when there is one: a nil *Server in the interface
		// would read as an authorization server that is on.
		ac.AuthServer = g.authServer
	}
	return admin.New(ac)
}

// The admin API sees the authorization server through its own interface.
var _ admin.AuthServer = (*authserver.Server)(nil)

// mainAdmin is the admin handler the main listener serves: nil when it
// has a listener of its own (or there is none).
func mainAdmin(h *admin.Handler, listen string) http.Handler {
	if h == nil || listen != "" {
		return nil
	}
	return h
}

// adminServer is the admin routes' own listener and server.
type adminServer struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup // the Serve goroutine
}

// listenAdmin opens gateway.admin.listen, when set; the admin routes are
// then served there only. Its Host check is the main listener's rule for
// its own address.
func (g *Gateway) listenAdmin(h *admin.Handler) error {
	a := g.cfg.Gateway.Admin
	if h == nil || a.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a.Listen)
	if err != nil {
		return fmt.Errorf("gateway.admin.listen: listen on %s: %w", a.Listen, err)
	}
	gw := g.cfg.Gateway
	allowed := hostCheck(a.Listen, gw.AllowedHosts, "", "")
	guard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host := requestHostName(r.Host); !allowed(host) {
			http.Error(w, "mcpgate: host not allowed", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
	g.admin = &adminServer{ln: ln, srv: &http.Server{
		Handler: guard, ReadHeaderTimeout: gw.HeaderTimeout, IdleTimeout: gw.IdleTimeout,
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}}
	return nil
}

// AdminAddr returns the admin listener's address, or nil when the admin
// routes are on the main listener (or off).
func (g *Gateway) AdminAddr() net.Addr {
	if g.admin == nil {
		return nil
	}
	return g.admin.ln.Addr()
}

// serveAdmin serves the admin listener, if any, until the returned stop
// is called: stop shuts it down (requests in flight get a second) and
// waits for it.
func (g *Gateway) serveAdmin() (stop func()) {
	s := g.admin
	if s == nil {
		return func() {}
	}
	s.wg.Go(func() {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("admin listener failed", "err", err)
		}
	})
	g.log.Info("admin listening", "addr", s.ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.srv.Shutdown(ctx)
		cancel()
		_ = s.srv.Close()
		s.wg.Wait()
	}
}

// closeAdminListener closes a listener opened by listenAdmin and never
// served (start failed after it).
func (g *Gateway) closeAdminListener() {
	if g.admin != nil {
		_ = g.admin.ln.Close()
	}
}

// requestHostName is a Host header as hostCheck's functions take it.
func requestHostName(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		hostport = h
	}
	if len(hostport) > 1 && hostport[0] == '[' && hostport[len(hostport)-1] == ']' {
		hostport = hostport[1 : len(hostport)-1]
	}
	return strings.ToLower(hostport)
}

// adminSource is admin.Source over a gateway.
type adminSource struct{ g *Gateway }

func (s adminSource) Servers() []admin.Server {
	cfg, srvs, _ := s.g.current()
	ready := s.g.Readiness()
	out := make([]admin.Server, 0, len(srvs))
	for name, sv := range srvs {
		c := cfg.Servers[name]
		as := admin.Server{Name: name, Type: string(c.Type), Isolation: string(c.Isolation), State: ready.Servers[name].State, Ready: ready.Servers[name].Ready}
		info := sv.Info()
		as.PID, as.Restarts, as.LastExit, as.Stderr = info.PID, info.Restarts, info.LastExit, info.Stderr
		as.Processes, as.Pending = info.Processes, info.Pending
		for _, p := range info.Pool {
			as.Pool = append(as.Pool, admin.Process{PID: p.PID, State: p.State, Restarts: p.Restarts, LastExit: p.LastExit, Sessions: p.Sessions, Pending: p.Pending})
		}
		out = append(out, as)
	}
	return append(out, disabledAdmin(cfg)...)
}

func (s adminSource) server(name string) (servers.Server, error) {
	_, srvs, _ := s.g.current()
	sv, ok := srvs[name]
	if !ok {
		return nil, admin.ErrNotFound
	}
	return sv, nil
}

func (s adminSource) Tools(ctx context.Context, name string) ([]string, error) {
	sv, err := s.server(name)
	if err != nil {
		return nil, err
	}
	return sv.Tools(ctx)
}

func (s adminSource) Restart(name, reason string) error {
	sv, err := s.server(name)
	if err != nil {
		return err
	}
	if err := sv.Restart(reason); errors.Is(err, servers.ErrNoProcess) {
		return admin.ErrNoProcess
	} else if err != nil {
		return err
	}
	return nil
}

func (s adminSource) Sessions(now time.Time) []admin.Session {
	list := s.g.Handler.SessionList(now)
	out := make([]admin.Session, 0, len(list))
	for _, si := range list {
		out = append(out, adminSession(si, now))
	}
	return out
}

func (s adminSource) EndSession(r *http.Request, id string) (admin.Session, error) {
	si, err := s.g.Handler.EndSession(r, id)
	switch {
	case errors.Is(err, front.ErrSessionUnknown):
		return admin.Session{}, admin.ErrNotFound
	case errors.Is(err, front.ErrSessionAmbiguous):
		return admin.Session{}, admin.ErrAmbiguous
	case errors.Is(err, front.ErrOwnerGone):
		return admin.Session{}, fmt.Errorf("%w: %w", admin.ErrOwnerGone, err)
	case errors.Is(err, front.ErrOwnerUnreachable):
		return admin.Session{}, fmt.Errorf("%w: %w", admin.ErrOwnerUnreachable, err)
	case err != nil:
		return admin.Session{}, err
	}
	return adminSession(si, time.Now()), nil
}

func adminSession(si front.SessionInfo, now time.Time) admin.Session {
	as := admin.Session{
		ID: si.IDPrefix, Target: si.Target, Version: si.Version, Legacy: si.Legacy, Principal: si.Principal,
		Opened: si.Opened.UTC(), AgeSeconds: now.Sub(si.Opened).Seconds(), IdleSeconds: si.Idle.Seconds(),
		Active: si.Active, Requests: si.Requests, Portable: si.Portable, EndedOn: si.EndedOn,
	}
	if o := si.Owner; o != nil {
		as.Owner = &admin.Replica{Instance: o.Instance, Advertise: o.Advertise, Self: o.Self}
	}
	return as
}

func (s adminSource) RequestsTotal() uint64 { return s.g.Handler.RequestsTotal() }

func (s adminSource) Authenticator() auth.Authenticator { return s.g.Handler.Authenticator() }

func (s adminSource) Cluster() *admin.Cluster {
	cl := s.g.cluster
	if cl == nil {
		return nil
	}
	c := &admin.Cluster{
		Replica:      admin.Replica{Instance: cl.Instance(), Advertise: cl.Advertise(), Self: true},
		LiveReplicas: cl.Live(), Redis: "none",
	}
	if s.g.cfg.Gateway.Cluster.Redis != nil {
		c.Redis = "up"
		if cl.Down() {
			c.Redis = "down"
		}
	}
	return c
}
