package gateway

import (
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/internal/aggregate"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/policy"
	"github.com/mcpgate/mcpgate/internal/servers"
)

// This file applies a new config to a running gateway (Reload): servers
// added are started, removed ones stopped, changed ones replaced; an
// endpoint whose members were added, removed, replaced or given another
// policy changes its members in place, keeping its sessions (see
// aggregate.Endpoint.SetMembers: list_changed, calls to a removed member
// answered naming it); an endpoint whose own settings that shape every
// exposed name or filter changed (separator, maxNameLength, snakeCase,
// tools, prompts, resources) is rebuilt, its sessions ended with a reason
// naming the keys; API keys, OAuth issuers and policies apply to the
// requests that come after. Everything else is left running untouched: an
// unchanged server keeps its processes and its sessions.
//
// A reload is all or nothing: the new config is checked (policies compile,
// no critical server's command is missing, the auth block can be served),
// the new servers started and the new endpoints built before anything is
// swapped; any failure stops what was started and leaves the old config
// running. The swap itself is one Handler.SetTargets; then the endpoints
// kept are given their new members (their sessions of replaced or removed
// servers end there, with the reason), the sessions of the targets taken
// away or replaced are ended (endpoints first: their sessions are sessions
// of the servers) and the old backends stopped.
// Sessions are ended by target key, so a session a client opened on a
// replaced target in the instant between the swap and that end is ended
// too (its client gets 404 and initializes again, on the new one): never
// the other way round, a session left on a stopped backend.
//
// Locking: reloader.mu serializes Reload with itself, with serve's logging
// at start and with shutdown (serve calls stop before it closes anything).
// reloader.state guards the fields Reload swaps (Gateway.cfg, servers,
// endpoints, auth, policies) against readers running beside a reload: the
// probes (Readiness) take it for reading through current. Reload never
// modifies a map or config it swapped out: it builds new ones.

// The reasons a reload gives the sessions it ends.
const (
	reasonServerRemoved   = "the server was removed from the config"
	reasonServerChanged   = "the server's config changed"
	reasonEndpointRemoved = "the endpoint was removed from the config"
	reasonEndpointChanged = "the endpoint's config changed"
)

// ErrStopped is returned by Reload once the gateway is shutting down.
var ErrStopped = errors.New("mcpgate: the gateway is shutting down")

// reloader is a Gateway's reload state.
type reloader struct {
	mu      sync.Mutex   // serializes Reload, serve's start logging and shutdown
	stopped bool         // guarded by mu: shutdown began, Reload refuses
	state   sync.RWMutex // guards the Gateway fields Reload swaps (see the file comment)

	// opts and hash (the config file's, at start) are set before serve
	// starts and not changed after (watch.go).
	opts ReloadOptions
	hash []byte
}

// stop makes every later Reload return ErrStopped, after waiting for one
// in progress.
func (r *reloader) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// locked runs f under mu (serve's logging at start, which reads the
// fields Reload swaps).
func (r *reloader) locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// current returns the gateway's config, servers and endpoints as of the
// last reload. The maps are never modified: read them freely.
func (g *Gateway) current() (*config.Config, map[string]servers.Server, map[string]*aggregate.Endpoint) {
	g.rl.state.RLock()
	defer g.rl.state.RUnlock()
	return g.cfg, g.servers, g.endpoints
}

// ReloadSummary is what a reload did, by name, sorted.
type ReloadSummary struct {
	Added, Removed, Changed, Unchanged []string // servers
	// EndpointsRebuilt are the endpoints built anew (added, or settings
	// changed: their sessions ended); EndpointsUpdated kept their
	// sessions, their members changed in place; EndpointsRemoved are gone.
	EndpointsRebuilt, EndpointsUpdated, EndpointsRemoved []string
	// Restart lists the gateway keys that changed but apply only at the
	// next start ("gateway.listen").
	Restart []string
}

// Reload applies cfg (loaded as serve loads its config; Reload validates
// it again) to the running gateway; see the file comment. On error nothing changed:
// each problem was logged at error level and the old config keeps
// running. Reloads are serialized; after shutdown began it returns
// ErrStopped.
func (g *Gateway) Reload(cfg *config.Config) error {
	_, err := g.reload(cfg)
	return err
}

func (g *Gateway) reload(cfg *config.Config) (ReloadSummary, error) {
	g.rl.mu.Lock()
	defer g.rl.mu.Unlock()
	if g.rl.stopped {
		return ReloadSummary{}, ErrStopped
	}
	p, err := g.prepare(cfg)
	if err != nil {
		logProblems(g.log, err)
		return ReloadSummary{}, err
	}
	g.apply(p)
	for _, key := range p.sum.Restart {
		g.log.Warn(key + " changed: restart to apply")
	}
	s := p.sum
	g.log.Info("config reloaded",
		"servers_added", strings.Join(s.Added, ","), "servers_removed", strings.Join(s.Removed, ","),
		"servers_changed", strings.Join(s.Changed, ","), "servers_unchanged", len(s.Unchanged),
		"endpoints_rebuilt", strings.Join(s.EndpointsRebuilt, ","), "endpoints_updated", strings.Join(s.EndpointsUpdated, ","),
		"endpoints_removed", strings.Join(s.EndpointsRemoved, ","))
	return s, nil
}

// plan is a reload checked and started, not yet swapped in.
type plan struct {
	cfg       *config.Config
	servers   map[string]servers.Server      // the new set: unchanged ones and the started ones
	started   []string                       // servers started for this reload (added, changed)
	endpoints map[string]*aggregate.Endpoint // the new set: unchanged ones and the built ones
	built     []string                       // endpoints built for this reload
	// rebuilt: why each endpoint built for this reload replaces the
	// running one (its sessions are ended with it).
	rebuilt map[string]string
	// members are the new members of the endpoints kept whose members
	// change (SetMembers, checked already).
	members  map[string][]aggregate.Member
	auth     auth.Authenticator
	policies policy.Set
	sum      ReloadSummary
}

// prepare checks cfg against the running config, starts the servers it
// adds or changes and builds the endpoints to rebuild. On error whatever
// it started is stopped.
func (g *Gateway) prepare(cfg *config.Config) (*plan, error) {
	old := g.cfg
	p := &plan{cfg: cfg, servers: map[string]servers.Server{}, endpoints: map[string]*aggregate.Endpoint{},
		rebuilt: map[string]string{}, members: map[string][]aggregate.Member{}}
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	pols, err := policy.FromConfig(cfg)
	if err != nil {
		errs = append(errs, err)
	}
	if err := checkSealKeys(cfg); err != nil {
		errs = append(errs, err)
	}
	keepPolicies(g.cfg, g.policies, cfg, pols)
	p.policies = pols
	replaced := map[string]bool{} // servers added, changed or removed: their endpoints are rebuilt
	for _, name := range cfg.Names() {
		o, ok := old.Servers[name]
		switch {
		case !ok:
			p.sum.Added = append(p.sum.Added, name)
			replaced[name] = true
		case !sameServer(o, cfg.Servers[name]):
			p.sum.Changed = append(p.sum.Changed, name)
			replaced[name] = true
		default:
			p.sum.Unchanged = append(p.sum.Unchanged, name)
		}
	}
	for _, name := range old.Names() {
		if _, ok := cfg.Servers[name]; !ok {
			p.sum.Removed = append(p.sum.Removed, name)
			replaced[name] = true
		}
	}
	// A critical server must be able to start, as at the gateway's start;
	// only the servers this reload starts are checked: a running one's
	// command vanishing from PATH since is no reason to refuse.
	var problems []CommandProblem
	for _, cp := range CheckCommands(cfg) {
		if replaced[cp.Server] {
			problems = append(problems, cp)
		}
	}
	if err := checkCritical(problems); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if p.auth, err = newAuthenticator(cfg, g.log, g.own); err != nil {
		return nil, err
	}
	for _, cp := range problems {
		g.log.Warn("server cannot start; serving it with errors and retrying", "server", cp.Server, "err", cp.Err)
	}
	fail := func(err error) (*plan, error) {
		p.discard()
		return nil, err
	}
	for _, name := range cfg.Names() {
		if !replaced[name] {
			p.servers[name] = g.servers[name]
			continue
		}
		s, err := servers.New(cfg.Servers[name], Version, g.log)
		if err != nil {
			return fail(err)
		}
		p.servers[name] = s
		p.started = append(p.started, name)
	}
	// The endpoints are built as start builds them, on a view of the
	// gateway as it will be.
	next := &Gateway{cfg: cfg, log: g.log, servers: p.servers, policies: pols}
	for _, name := range cfg.EndpointNames() {
		ep := cfg.Endpoints[name]
		e, ok := g.endpoints[name]
		keys := endpointKeysChanged(old.Endpoints[name], ep)
		if ok && len(keys) == 0 {
			p.endpoints[name] = e
			if membersChanged(old, cfg, name, replaced) {
				ms := next.members(ep)
				if err := e.CheckMembers(ms); err != nil {
					return fail(err) // it names the endpoint
				}
				p.members[name] = ms
				p.sum.EndpointsUpdated = append(p.sum.EndpointsUpdated, name)
			}
			continue
		}
		e, err := aggregate.New(endpointOptions(ep, g.log), next.members(ep))
		if err != nil {
			return fail(err) // it names the endpoint
		}
		p.endpoints[name] = e
		p.built = append(p.built, name)
		if ok {
			p.rebuilt[name] = endpointRebuiltReason(name, keys)
		}
	}
	p.sum.EndpointsRebuilt = slices.Clone(p.built)
	for _, name := range old.EndpointNames() {
		if _, ok := cfg.Endpoints[name]; !ok {
			p.sum.EndpointsRemoved = append(p.sum.EndpointsRemoved, name)
		}
	}
	p.sum.Restart = restartKeys(old.Gateway, cfg.Gateway)
	return p, nil
}

// discard stops what prepare started for a reload that is refused.
func (p *plan) discard() {
	var wg sync.WaitGroup
	for _, name := range p.built {
		wg.Go(p.endpoints[name].Close)
	}
	wg.Wait()
	for _, name := range p.started {
		wg.Go(p.servers[name].Close)
	}
	wg.Wait()
	closeAuth(p.auth)
}

// apply swaps plan p in and ends what it replaced: the sessions of the
// endpoints and servers removed or replaced (with the reason), then those
// endpoints, then those servers, then the old Authenticator.
func (g *Gateway) apply(p *plan) {
	backends := make(map[string]conn.Backend, len(p.servers))
	for name, s := range p.servers {
		backends[name] = s
	}
	endpoints := make(map[string]conn.Backend, len(p.endpoints))
	for name, e := range p.endpoints {
		endpoints[name] = e
	}
	g.Handler.SetTargets(front.Targets{
		Backends: backends, Endpoints: endpoints, Policies: handlerPolicies(p.policies), Auth: p.auth,
	})

	oldServers, oldEndpoints, oldAuth := g.servers, g.endpoints, g.auth
	// The gateway block keeps what needs a restart; its auth is the new
	// one (logAuth, Readiness and the next reload compare with it).
	cfg := *p.cfg
	cfg.Gateway = g.cfg.Gateway
	cfg.Gateway.Auth = p.cfg.Gateway.Auth
	cfg.Gateway.SealKeys, cfg.Gateway.SealKeyFile = p.cfg.Gateway.SealKeys, p.cfg.Gateway.SealKeyFile
	g.setSealKeys(g.cfg, p.cfg) // seal.go
	g.rl.state.Lock()
	g.cfg, g.servers, g.endpoints, g.auth, g.policies = &cfg, p.servers, p.endpoints, p.auth, p.policies
	g.rl.state.Unlock()

	// Before any old server stops: the endpoints end their sessions of
	// it themselves, telling the requests in flight which member left.
	for name, ms := range p.members {
		if err := p.endpoints[name].SetMembers(ms); err != nil {
			g.log.Error("endpoint members not changed", "endpoint", name, "err", err) // checked in prepare: not expected
		}
	}
	var wg sync.WaitGroup
	for name, e := range oldEndpoints {
		if p.endpoints[name] == e {
			continue
		}
		reason, ok := p.rebuilt[name]
		if !ok {
			reason = reasonEndpointRemoved
		}
		g.log.Info("endpoint sessions ended by the reload", "endpoint", name, "reason", reason)
		wg.Go(func() {
			g.Handler.CloseTarget(front.EndpointKey(name), reason)
			e.Close()
		})
	}
	wg.Wait()
	for name, s := range oldServers {
		if p.servers[name] == s {
			continue
		}
		reason := reasonServerChanged
		if _, ok := p.servers[name]; !ok {
			reason = reasonServerRemoved
		}
		wg.Go(func() {
			g.Handler.CloseTarget(name, reason)
			s.Close()
		})
	}
	wg.Wait()
	if oldAuth != p.auth {
		closeAuth(oldAuth) // requests still using it fail their remote checks at worst
	}
}

// sameServer reports whether a server's entry is unchanged but for what
// applies without restarting it: its auth and its policy (the handler's
// and the endpoints', see endpointChanged).
func sameServer(a, b *config.Server) bool {
	x, y := *a, *b
	x.Auth, y.Auth, x.Policy, y.Policy = nil, nil, nil, nil
	return reflect.DeepEqual(x, y)
}

// membersChanged reports whether the members of endpoint name differ
// between configs a and b: one was added, removed or replaced (a server
// of replaced), or its policy (which the endpoint applies itself)
// changed. Their order alone is no change: a running endpoint lists its
// members in the order they joined it.
func membersChanged(a, b *config.Config, name string, replaced map[string]bool) bool {
	old, ep := a.Endpoints[name], b.Endpoints[name]
	x, y := slices.Clone(old.Servers), slices.Clone(ep.Servers)
	slices.Sort(x)
	slices.Sort(y)
	if !slices.Equal(x, y) {
		return true
	}
	for _, m := range ep.Servers {
		if replaced[m] || !reflect.DeepEqual(a.Servers[m].Policy, b.Servers[m].Policy) {
			return true
		}
	}
	return false
}

// restartKeys returns the gateway keys ("gateway.listen") whose values
// differ between a and b and apply only at start: every key but auth and
// the seal keys (applied by a reload) and the ones copied into each
// server at load (requestTimeout, maxLineBytes, secrets: a reload
// compares the servers).
func restartKeys(a, b config.Gateway) []string {
	var keys []string
	if publicURL(a) != publicURL(b) {
		keys = append(keys, "gateway.auth.publicUrl")
	}
	if !reflect.DeepEqual(authServerOf(a), authServerOf(b)) {
		// The authorization server is built once (authserver.go).
		keys = append(keys, "gateway.auth.server")
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		switch f.Name {
		case "Auth", "RequestTimeout", "MaxLineBytes", "SecretsFile", "Secrets", "SealKeys", "SealKeyFile":
			continue
		}
		if !f.IsExported() {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			keys = append(keys, "gateway."+jsonKey(f.Name))
		}
	}
	slices.Sort(keys)
	return keys
}

// jsonKey is a Go field name as its config key: MaxConnections ->
// maxConnections, SSEReplayEvents -> sseReplayEvents.
func jsonKey(field string) string {
	n := 0
	for n < len(field) && field[n] >= 'A' && field[n] <= 'Z' {
		n++
	}
	if n > 1 && n < len(field) {
		n-- // the last capital starts the next word
	}
	return strings.ToLower(field[:n]) + field[n:]
}

// logProblems logs a refused reload's error, one line per problem (a
// config.Problems, or joined errors, may hold many).
func logProblems(log *slog.Logger, err error) {
	for _, line := range problemLines(err) {
		log.Error("config reload refused; the old config keeps running", "problem", line)
	}
}

// problemLines splits err into its problems, one line each.
func problemLines(err error) []string {
	var lines []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			lines = append(lines, problemLines(e)...)
		}
		return lines
	}
	var ps config.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			lines = append(lines, p.Error())
		}
		return lines
	}
	for _, l := range strings.Split(err.Error(), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
