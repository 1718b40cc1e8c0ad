package gateway

import (
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/front"
)

// newAuthenticator builds the HTTP front's Authenticator from
// cfg.Gateway.Auth and the servers' and endpoints' "auth" keys: an
// auth.Gate; nil (no authentication) when there is no gateway.auth. It
// fails when the config cannot be served as written (an API key file
// that cannot be read, an issuer the auth package refuses): never served
// open instead. With gateway.auth.server, own is the gate's entry for
// the gateway's own authorization server (authserver.go).
func newAuthenticator(cfg *config.Config, log *slog.Logger, own *ownIssuer) (auth.Authenticator, error) {
	if cfg.Gateway.Auth == nil {
		return nil, nil
	}
	ac := authConfig(cfg)
	if s := cfg.Gateway.Auth.Server; s != nil && own != nil {
		// Its tokens need no scope but those of the targets' own "auth":
		// a client may narrow its scopes, and the resource in the token
		// already says which target it is for.
		ac.Issuers = append(ac.Issuers, own.issuer(s))
	}
	g, err := auth.New(ac, auth.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// authConfig copies the config's authentication settings into the auth
// package's own Config (auth is a leaf: it does not know internal/config).
func authConfig(cfg *config.Config) auth.Config {
	a := cfg.Gateway.Auth
	ac := auth.Config{Required: a.Required, Servers: map[string]auth.TargetConfig{}, Endpoints: map[string]auth.TargetConfig{}}
	if o := a.OAuth; o != nil {
		ac.Scopes, ac.ResourceName = slices.Clone(o.Scopes), o.ResourceName
		for _, is := range o.Issuers {
			ai := auth.Issuer{Issuer: is.Issuer, JWKSURL: is.JWKSURL, Audiences: slices.Clone(is.Audiences), Algorithms: slices.Clone(is.Algorithms)}
			if in := is.Introspection; in != nil {
				ai.Introspection = &auth.Introspection{URL: in.URL, ClientID: in.ClientID, ClientSecret: in.ClientSecret}
			}
			ac.Issuers = append(ac.Issuers, ai)
		}
	}
	for _, k := range a.APIKeys {
		ac.APIKeys = append(ac.APIKeys, auth.APIKey{
			Name: k.Name, SHA256: k.SHA256, KeyFile: k.KeyFile, KeyEnv: k.KeyEnv,
			Servers: slices.Clone(k.Servers), Endpoints: slices.Clone(k.Endpoints), Scopes: slices.Clone(k.Scopes),
		})
	}
	for name, s := range cfg.Servers {
		if s.Auth != nil {
			ac.Servers[name] = auth.TargetConfig{Off: s.Auth.Off, Scopes: slices.Clone(s.Auth.Scopes)}
		}
	}
	for name, e := range cfg.Endpoints {
		if e.Auth != nil {
			ac.Endpoints[name] = auth.TargetConfig{Off: e.Auth.Off, Scopes: slices.Clone(e.Auth.Scopes)}
		}
	}
	return ac
}

// publicURL is the gateway's public URL from the config ("" for none).
func publicURL(gw config.Gateway) string {
	if gw.Auth == nil {
		return ""
	}
	return gw.Auth.PublicURL
}

// closeAuth closes an Authenticator that holds resources (an auth.Gate's
// HTTP client; an io.Closer).
func closeAuth(a auth.Authenticator) {
	switch c := a.(type) {
	case io.Closer:
		_ = c.Close()
	case interface{ Close() }:
		c.Close()
	}
}

// logAuth logs which targets ask for credentials and which do not (and
// warns when targets that do not are reachable beyond loopback), or, with
// no authentication at all on such an address, that anyone can use every
// server.
func (g *Gateway) logAuth(addr string) {
	loopback := isLoopbackListen(g.cfg.Gateway.Listen)
	if g.auth == nil {
		if !loopback {
			g.log.Warn("listening on a non-loopback address without authentication: anyone who can reach it can use every server",
				"addr", addr)
		}
		return
	}
	base := strings.TrimRight(publicURL(g.cfg.Gateway), "/")
	if base == "" {
		base = "http://" + addr
		if g.certs != nil {
			base = "https://" + addr
		}
	}
	var protected, open []string
	check := func(kind, name, path string) {
		t := auth.Target{Kind: kind, Name: name, Resource: base + path, Metadata: base + "/.well-known/oauth-protected-resource" + path}
		paths := []string{path}
		if kind == "endpoint" && name == front.DefaultEndpoint {
			paths = append(paths, "/mcp") // the same target
		}
		if _, ok := g.auth.Metadata(t); ok {
			protected = append(protected, paths...)
		} else {
			open = append(open, paths...)
		}
	}
	for _, name := range g.cfg.Names() {
		check("server", name, "/servers/"+name+"/mcp")
	}
	for _, name := range g.cfg.EndpointNames() {
		check("endpoint", name, "/endpoints/"+name+"/mcp")
	}
	g.log.Info("authentication", "protected", strings.Join(protected, ","), "open", strings.Join(open, ","))
	if len(open) > 0 && !loopback {
		g.log.Warn("listening on a non-loopback address: anyone who can reach it can use the targets that need no credentials",
			"addr", addr, "open", strings.Join(open, ","))
	}
}
