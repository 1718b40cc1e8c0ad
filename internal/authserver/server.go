package authserver

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/seal"
)

// Deps are what the gateway gives the authorization server.
type Deps struct {
	// Ring signs access tokens: keys.go derives a signing key from each
	// of its keys, so every replica sharing the ring signs and checks
	// alike, and a ring rotation rotates the signing keys.
	Ring *seal.Ring
	// Store keeps clients, requests, codes, grants and passkeys. Nil: a
	// memory store (tests).
	Store Store
	// Resources returns the canonical URLs of the protected servers and
	// endpoints, and their legacy /sse URLs: a token's resource (RFC 8707)
	// must be one of them.
	Resources func() []string
	// Logger gets sign-ins, refusals and the one-time sign-in code.
	Logger *slog.Logger
	// Now is the clock (tests move it). Default time.Now.
	Now func() time.Time
	// TrustProxyHeaders is gateway.trustProxyHeaders: the sign-in
	// throttle then counts failures by the address X-Forwarded-For
	// names, not the proxy's.
	TrustProxyHeaders bool
}

// Server is the gateway's own OAuth 2.1 authorization server
// (gateway.auth.server). Its parts, one file each: provider.go (the
// protocol: metadata, authorize, token, revocation, keys, through
// zitadel/oidc's op package), clients.go (registration and client ID
// metadata documents, the redirect URI policy), login.go (sign-in and
// consent pages, passkeys). Handler serves all of their routes.
type Server struct {
	cfg   config.AuthServer
	deps  Deps
	store Store
	mux   *http.ServeMux

	provider *provider
	clients  *clientRegistry
	login    *loginPages
}

// New builds the server of cfg (defaults already applied by config).
func New(cfg config.AuthServer, deps Deps) (*Server, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("authserver: no issuer")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Ring == nil {
		deps.Ring = seal.NewRandom()
	}
	s := &Server{cfg: cfg, deps: deps, store: deps.Store, mux: http.NewServeMux()}
	if s.store == nil {
		s.store = newMemStore(deps.Now, cfg.AccessTokenTTL)
	}
	var err error
	if s.clients, err = newClientRegistry(s); err != nil {
		return nil, err
	}
	if s.login, err = newLoginPages(s); err != nil {
		return nil, err
	}
	if s.provider, err = newProvider(s); err != nil {
		return nil, err
	}
	s.provider.routes(s.mux)
	s.clients.routes(s.mux)
	s.login.routes(s.mux)
	return s, nil
}

// Handler serves the server's routes (its metadata at the well-known
// root, everything else under /oauth/).
func (s *Server) Handler() http.Handler { return s.mux }
