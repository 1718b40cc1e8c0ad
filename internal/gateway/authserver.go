package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/authserver"
	"github.com/mcpgate/mcpgate/internal/cluster"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/seal"
)

// This file wires gateway.auth.server, the gateway's own authorization
// server (internal/authserver): built on the key ring and a Store (the
// state file, or gateway.cluster's Redis), served on the main listener
// ahead of the front (its URLs are public: no bearer token, no Origin
// refusal, only the Host check), and trusted by the gate like any issuer
// but with its keys and revocations in process.
//
// A reload keeps the authorization server as started: its settings
// (users, scopes, redirect policy, TTLs) apply at the next start, and a
// reload that changes them says so (restartKeys). The gate a reload
// builds trusts the same server.

// ownIssuer is the gateway's authorization server as the gate's issuer
// entry sees it. The gate is built before the server (Start builds the
// authenticator first, the server needs the ring and the cluster start
// makes), so the entry reads the server through this pointer, set once
// the server exists; until then it has no key, and no token verifies.
type ownIssuer struct {
	srv atomic.Pointer[authserver.Server]
}

// keys gives the server's verification keys (auth.Issuer.Keys).
func (o *ownIssuer) keys() []auth.PublicKey {
	s := o.srv.Load()
	if s == nil {
		return nil
	}
	pks := s.PublicKeys()
	out := make([]auth.PublicKey, len(pks))
	for i, k := range pks {
		out[i] = auth.PublicKey{ID: k.ID, Algorithm: "EdDSA", Key: k.Key}
	}
	return out
}

// revoked reports a token of a revoked grant (auth.Issuer.Revoked).
func (o *ownIssuer) revoked(claims map[string]any) bool {
	s := o.srv.Load()
	return s != nil && s.Revoked(claims)
}

// issuer is the gate's entry for the server of cfg: EdDSA only, its keys
// and revocations in process.
func (o *ownIssuer) issuer(cfg *config.AuthServer) auth.Issuer {
	return auth.Issuer{Issuer: cfg.Issuer, Algorithms: []string{"EdDSA"}, Keys: o.keys, Revoked: o.revoked}
}

// startAuthServer builds the authorization server of cfg (nil when
// there is none) and points own at it.
func (g *Gateway) startAuthServer(cfg *config.Config, ring *seal.Ring, cl *cluster.Cluster, own *ownIssuer) error {
	if cfg.Gateway.Auth == nil || cfg.Gateway.Auth.Server == nil {
		return nil
	}
	sc := *cfg.Gateway.Auth.Server
	// The state file's path is already resolved against the config
	// file's directory (config). The context is the Store's life, not
	// a bound on opening it: a Redis Store watches the revocations of
	// the other replicas until it ends, so one cancelled on return
	// would leave this replica deaf to them (an access token of a grant
	// revoked elsewhere accepted here until it expires). Close ends the
	// watch; the calls of the open are bounded by the Redis client's
	// timeouts.
	store, err := authserver.OpenStore(context.Background(), storeSettings(sc), "", cl.Redis(), time.Now)
	if err != nil {
		return fmt.Errorf("gateway.auth.server: %w", err)
	}
	srv, err := authserver.New(sc, authserver.Deps{Ring: ring, Store: store, Resources: g.protectedResources, TrustProxyHeaders: cfg.Gateway.TrustProxyHeaders, Logger: g.log.With("part", "authserver")})
	if err != nil {
		closeStore(store, g.log)
		return fmt.Errorf("gateway.auth.server: %w", err)
	}
	g.authServer, g.authStore = srv, store
	own.srv.Store(srv)
	g.log.Info("authorization server", "issuer", sc.Issuer, "metadata", strings.TrimRight(sc.Issuer, "/")+"/.well-known/oauth-authorization-server")
	return nil
}

// storeSettings are the settings the Store is opened with: sc, but a
// revoked grant remembered for as long as the gate may accept one of its
// access tokens, their life and the gate's leeway on exp (the Store
// remembers it for AccessTokenTTL).
func storeSettings(sc config.AuthServer) config.AuthServer {
	sc.AccessTokenTTL += auth.ExpiryLeeway
	return sc
}

// authServerOf is gw's gateway.auth.server; nil without one.
func authServerOf(gw config.Gateway) *config.AuthServer {
	if gw.Auth == nil {
		return nil
	}
	return gw.Auth.Server
}

// closeAuthStore closes the authorization server's Store, once nothing
// is served any more.
func (g *Gateway) closeAuthStore() {
	if g.authStore != nil {
		closeStore(g.authStore, g.log)
	}
}

// closeStore closes a Store that holds resources (a Redis Store's
// subscriber).
func closeStore(s authserver.Store, log *slog.Logger) {
	if c, ok := s.(io.Closer); ok {
		if err := c.Close(); err != nil {
			log.Warn("closing the authorization server's store", "err", err)
		}
	}
}

// protectedResources are the canonical URLs of the protected servers
// and endpoints (and their legacy /sse URLs), on the gateway's public URL
// (else the issuer's): what a token's resource (RFC 8707) may be.
func (g *Gateway) protectedResources() []string {
	g.rl.state.RLock()
	cfg, a := g.cfg, g.auth
	g.rl.state.RUnlock()
	if a == nil || cfg.Gateway.Auth == nil {
		return nil
	}
	base := publicURL(cfg.Gateway)
	if base == "" && cfg.Gateway.Auth.Server != nil {
		base = cfg.Gateway.Auth.Server.Issuer
	}
	base = strings.TrimRight(base, "/")
	var out []string
	add := func(kind, name string, paths ...string) {
		t := auth.Target{Kind: kind, Name: name, Resource: base + paths[0]}
		if _, ok := a.Metadata(t); ok {
			for _, p := range paths {
				out = append(out, base+p)
			}
		}
	}
	// Each target's legacy /sse URL too: the resource an SSE client asks
	// a token for (front/metadata.go).
	for _, name := range cfg.Names() {
		add("server", name, "/servers/"+name+"/mcp", "/servers/"+name+"/sse")
	}
	for _, name := range cfg.EndpointNames() {
		if name == front.DefaultEndpoint {
			add("endpoint", name, "/endpoints/"+name+"/mcp", "/mcp", "/endpoints/"+name+"/sse", "/sse")
		} else {
			add("endpoint", name, "/endpoints/"+name+"/mcp", "/endpoints/"+name+"/sse")
		}
	}
	return out
}

// withAuthServer serves the authorization server's URLs ahead of next
// (the front): they are public, so they skip the front's admission, but
// not its Host check (the issuer's host is allowed besides).
func (g *Gateway) withAuthServer(next http.Handler) http.Handler {
	if g.authServer == nil {
		return next
	}
	gw := g.cfg.Gateway
	base := hostCheck(gw.Listen, gw.AllowedHosts, gw.HostRouting.Domain, publicURL(gw))
	issuerHost := ""
	if u, err := url.Parse(g.authServer.Issuer()); err == nil {
		issuerHost = strings.ToLower(u.Hostname())
	}
	allowed := base
	if base != nil {
		allowed = func(host string) bool { return host == issuerHost || base(host) }
	}
	as := g.authServer.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isAuthServerPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if allowed != nil && !allowed(requestHostName(r.Host)) {
			// As the front's Host check: a page of ours under a name
			// we do not serve is a DNS rebinding.
			http.Error(w, "mcpgate: host not allowed", http.StatusForbidden)
			return
		}
		as.ServeHTTP(w, r)
	})
}

// isAuthServerPath reports whether path is one of the authorization
// server's: /oauth/..., its RFC 8414 metadata (also path-inserted) and
// its OpenID discovery document.
func isAuthServerPath(path string) bool {
	const asMeta = "/.well-known/oauth-authorization-server"
	return strings.HasPrefix(path, "/oauth/") || path == asMeta || strings.HasPrefix(path, asMeta+"/") ||
		strings.HasSuffix(path, "/.well-known/openid-configuration")
}
