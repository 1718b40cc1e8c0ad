package aggregate

import (
	"context"
	"reflect"
	"slices"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
)

// A session belongs to one principal by name (the HTTP front lets only
// requests of the same kind and name into it), but what that principal
// holds may change while the session lives: a client refreshes its token
// with fewer scopes, a reload changes an API key's scopes. The front
// applies a target's policy with each request's principal; the members'
// policies applied here must too, or a session opened with a scope would
// keep listing and calling what the principal has lost (found by the
// attack tests: TestMemberPolicyFollowsRequestPrincipal). So each request
// brings its principal, and when it differs from the one the session's
// lists were filtered for, the policies' decisions are made again (the
// views' keys name decisions, never principals: a session whose decisions
// did not change keeps its views).

// who returns the principal the session's member policies apply to now.
func (c *clientSession) who() *auth.Principal { return c.principal.Load() }

// requestPrincipal makes the principal of a request's ctx, if any, the
// session's.
func (c *clientSession) requestPrincipal(ctx context.Context) {
	p := conn.Principal(ctx)
	if p == nil || p == c.who() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if samePrincipal(p, c.who()) {
		return
	}
	c.principal.Store(p)
	for _, mc := range c.members {
		mc.policy = [numKinds]policyKey{}
	}
	c.epoch++ // every view key is made again
}

// samePrincipal reports whether a and b are the same principal with the
// same scopes and claims: every policy decides the same for both.
func samePrincipal(a, b *auth.Principal) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && a.Name == b.Name && a.Issuer == b.Issuer &&
		slices.Equal(a.Scopes, b.Scopes) && reflect.DeepEqual(a.Claims, b.Claims)
}
