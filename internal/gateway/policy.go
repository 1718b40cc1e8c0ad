package gateway

import (
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/policy"
)

// handlerPolicies maps the compiled policies onto the HTTP front's, by
// target key. Only targets with a policy are in it (a nil *policy.Policy
// in an interface would not be nil).
func handlerPolicies(set policy.Set) map[string]conn.Policy {
	out := make(map[string]conn.Policy, len(set.Servers)+len(set.Endpoints))
	for name, p := range set.Servers {
		out[name] = p
	}
	for name, p := range set.Endpoints {
		out[front.EndpointKey(name)] = p
	}
	return out
}

// memberPolicy is server name's policy as an endpoint member applies it
// (nil: none).
func (g *Gateway) memberPolicy(name string) conn.Policy {
	if p := g.policies.Servers[name]; p != nil {
		return p
	}
	return nil
}

// CheckPolicies compiles every policy of cfg, as Start does: the error is
// config.Problems, one per expression that does not compile. `validate`
// and `serve` report them with the config's other problems.
func CheckPolicies(cfg *config.Config) error {
	_, err := policy.FromConfig(cfg)
	return err
}
