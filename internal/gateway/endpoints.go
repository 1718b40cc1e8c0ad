package gateway

import (
	"log/slog"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/internal/aggregate"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/servers"
)

// startEndpoints builds one aggregate.Endpoint per configured endpoint on
// the servers' backends (g.servers), into g.endpoints; it returns them as
// the HTTP front's Backends by endpoint name. On error the endpoints made
// so far are closed (the caller stops the servers).
func (g *Gateway) startEndpoints() (map[string]conn.Backend, error) {
	backends := make(map[string]conn.Backend, len(g.cfg.Endpoints))
	for _, name := range g.cfg.EndpointNames() {
		e, err := aggregate.New(endpointOptions(g.cfg.Endpoints[name], g.log), g.members(g.cfg.Endpoints[name]))
		if err != nil {
			g.closeEndpoints()
			return nil, err // it names the endpoint
		}
		g.endpoints[name] = e
		backends[name] = e
	}
	return backends, nil
}

// endpointOptions maps a config endpoint onto the aggregate's options.
func endpointOptions(ep *config.Endpoint, log *slog.Logger) aggregate.Options {
	return aggregate.Options{
		Name: ep.Name, Separator: ep.Separator, MaxNameLen: ep.MaxNameLength, SnakeCase: ep.SnakeCase,
		PageSize: ep.PageSize, MaxListBytes: ep.MaxListBytes,
		Filter:  filter(ep.Tools, ep.Prompts, ep.Resources),
		Version: Version, Logger: log, // the aggregate names the endpoint itself
	}
}

// members returns the members of endpoint ep: each server's backend, its
// prefix, filters, criticality and timeout, and its readiness when its
// backend knows it (a shared server; see servers.Server).
func (g *Gateway) members(ep *config.Endpoint) []aggregate.Member {
	ms := make([]aggregate.Member, 0, len(ep.Servers))
	for _, name := range ep.Servers {
		s, be := g.cfg.Servers[name], g.servers[name]
		m := aggregate.Member{
			Name: name, Backend: be, Prefix: s.Prefix, Critical: s.Critical, Timeout: s.Timeout,
			Filter: filter(s.Tools, s.Prompts, s.Resources), Policy: g.memberPolicy(name),
			// One process answers every session's lists.
			SharedLists: s.Type == config.TypeStdio && s.Isolation == config.IsolationShared,
		}
		if be != nil && !be.PerSession() {
			m.State, m.FirstStart = be.Ready, be.FirstStart
		}
		// Its stateless requests' processes serve the endpoint's.
		m.OpenStateless = servers.StatelessSession(be, g.log.With("server", name))
		ms = append(ms, m)
	}
	return ms
}

func filter(tools, prompts, resources config.Globs) aggregate.Filter {
	globs := func(g config.Globs) aggregate.Globs { return aggregate.Globs{Allow: g.Allow, Deny: g.Deny} }
	return aggregate.Filter{Tools: globs(tools), Prompts: globs(prompts), Resources: globs(resources)}
}

// logEndpoints logs each endpoint, its URL and its servers.
func (g *Gateway) logEndpoints() {
	for _, name := range g.cfg.EndpointNames() {
		path := "/endpoints/" + name + "/mcp"
		if name == front.DefaultEndpoint {
			path += " and /mcp"
		}
		g.log.Info("endpoint", "name", name, "path", path, "servers", strings.Join(g.cfg.Endpoints[name].Servers, ","))
	}
}

// closeEndpoints ends every endpoint's sessions of its members, in
// parallel. It comes before the servers are stopped: an endpoint's
// sessions are sessions of the servers.
func (g *Gateway) closeEndpoints() {
	var wg sync.WaitGroup
	for _, e := range g.endpoints {
		wg.Go(e.Close)
	}
	wg.Wait()
}

// pending returns the requests in flight upstream: the servers', and
// separately the endpoints' (requests to their members, also counted by
// the servers, plus the endpoints' own work such as merging lists).
func (g *Gateway) pending() (servers, endpoints int) {
	for _, s := range g.servers {
		servers += s.Pending()
	}
	for _, e := range g.endpoints {
		endpoints += e.Pending()
	}
	return servers, endpoints
}
