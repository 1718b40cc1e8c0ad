package aggregate

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// initialize answers the client's initialize. Each member is initialized
// with the client's params, in parallel, each within its Timeout (one not
// ready within startWait at most, unless critical); the answer waits for
// all of them and merges theirs. A member that fails is down for the
// session (hidden; initialized when it is next seen becoming ready, and
// the client told then with list_changed), unless it is critical: then
// the initialize fails, naming it.
func (c *clientSession) initialize(ctx context.Context, p *pending, params []byte) {
	// The states as they are now, not as last polled: a gateway that just
	// started has its members starting, and ready a moment later.
	for i := range c.memberCount() {
		c.e.refresh(i)
	}
	c.mu.Lock()
	if c.initParams != nil {
		c.mu.Unlock()
		c.fail(p, errorf(protocol.CodeInvalidRequest, "the session is already initialized"))
		return
	}
	if params == nil {
		params = []byte(`{}`)
	}
	c.initParams = params
	var todo []*member
	members := c.members                         // members joining later are initialized by join, or below
	sent := make([]bool, len(members))           // in todo: sent this initialize
	waited := make([]bool, len(members))         // not ready: given a start wait at most
	waits := make([]time.Duration, len(members)) // how long, for those waited
	for _, mc := range members {
		if mc.conn != nil {
			mc.initing = true
			todo = append(todo, mc)
			sent[mc.i] = true
			waited[mc.i] = !mc.ready && !mc.m.Critical
			waits[mc.i] = c.e.startWait(mc.m)
		}
	}
	c.mu.Unlock()

	// Every member is sent the initialize: one backing off answers at once
	// (and is hidden), one starting is waited for, but not for long unless
	// it is critical: a server restarting must not hold up the others, and
	// one on its first start (a download) is waited for at most
	// FirstStartWait. It is initialized when it becomes ready.
	results := make([][]byte, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for _, mc := range todo {
		wg.Go(func() {
			mctx, cancel := c.memberCtxOf(ctx, mc)
			defer cancel()
			if waited[mc.i] {
				var cancelWait context.CancelFunc
				mctx, cancelWait = context.WithTimeoutCause(mctx, waits[mc.i], deadline{waits[mc.i]})
				defer cancelWait()
			}
			results[mc.i], errs[mc.i] = c.callMember(mctx, mc, protocol.MethodInitialize, params)
		})
	}
	wg.Wait()
	// A member that answered is ready now, whatever was polled before.
	for i := range members {
		c.e.refresh(i)
	}

	var critical error
	c.mu.Lock()
	for _, mc := range todo {
		mc.initing = false
		if err := errs[mc.i]; err != nil {
			mc.failed = "its initialize failed: " + strings.TrimPrefix(err.Error(), "mcpgate: ")
			// A member a reload replaced or removed meanwhile (its session
			// closed under the initialize) is not the session's any
			// longer: its successor joins in the background, and the
			// client's initialize does not fail for it (found by the
			// fault tests).
			if mc.m.Critical && critical == nil && c.members[mc.i] == mc {
				critical = errorf(protocol.CodeServerError, "server %q, critical in endpoint %q, failed to initialize: %s",
					mc.m.Name, c.e.opts.Name, strings.TrimPrefix(err.Error(), "mcpgate: "))
			}
			continue
		}
		mc.up, mc.caps = true, parseCaps(results[mc.i])
		if mc.apart {
			// Its own processes answered: it serves this session whatever
			// the process of its sessions is doing (starting, backing off
			// after a crash), which is what Member.State tells (found by
			// the fault tests: a stateless request hid a member it could
			// use). Later changes of that state still hide and show it.
			mc.ready = true
		}
		c.e.rememberCaps(mc, mc.caps)
	}
	var result []byte
	if critical == nil {
		result = c.mergeInit(params, members, results)
		c.version = jsonVersion(result)
		c.epoch++
		// Members that became ready while they were waited for (their
		// becoming ready was told while they were initializing), and
		// members that joined the session meanwhile (SetMembers),
		// including one already in members whose Open (join) was under
		// way above and ended since: join left it to this initialize,
		// which had not set the version yet (found by the fault tests).
		for _, mc := range c.members {
			joined := mc.i >= len(members) || members[mc.i] != mc || !sent[mc.i]
			if mc.ready && !mc.up && !mc.initing && mc.conn != nil && (joined || waited[mc.i]) {
				c.startInitLocked(mc)
			}
		}
	}
	c.mu.Unlock()
	for _, mc := range todo {
		if err := errs[mc.i]; err != nil && !mc.m.Critical {
			c.e.logHidden(mc, err)
		}
	}
	if critical != nil {
		c.fail(p, critical)
		return
	}
	c.answer(p, result)
}

// mergeInit returns the endpoint's initialize result from the members'
// (nil for those not up): the oldest protocol version any member agreed
// (every member speaks it), the capabilities the endpoint serves,
// serverInfo naming the endpoint, and the members' instructions under
// their names. The capabilities are every list, completions and logging
// whatever the members have now (list changes always announced: the
// endpoint announces members leaving and joining): a session's
// capabilities cannot change, and a member a reload adds joins the
// session with what it has; a client checks them before it calls (found
// by the fault tests). An endpoint without such a member answers with
// empty lists, and setLevel with nothing to set. Resource subscriptions
// are declared when a member has them (members not up count with the
// capabilities they had last).
func (c *clientSession) mergeInit(params []byte, members []*member, results [][]byte) []byte {
	var req struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &req)
	version := ""
	var all caps
	var instructions []string
	for i, r := range results {
		if members[i].removed {
			continue
		}
		if r == nil {
			all |= c.e.knownCaps(i)
			continue
		}
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
			Instructions    string `json:"instructions"`
		}
		_ = json.Unmarshal(r, &res)
		if protocol.IsSessionVersion(res.ProtocolVersion) && (version == "" || res.ProtocolVersion < version) {
			version = res.ProtocolVersion
		}
		all |= parseCaps(r)
		if res.Instructions != "" {
			instructions = append(instructions, "## "+members[i].m.Name+"\n\n"+res.Instructions)
		}
	}
	if version == "" {
		version = mux.Negotiate(req.ProtocolVersion, "")
	}
	type object = map[string]any
	listed := object{"listChanged": true}
	capabilities := object{
		"tools":       listed,
		"prompts":     listed,
		"resources":   object{"listChanged": true, "subscribe": all&capSubscribe != 0},
		"logging":     object{},
		"completions": object{},
	}
	out := object{
		"protocolVersion": version,
		"capabilities":    capabilities,
		"serverInfo":      object{"name": c.e.opts.Name, "version": c.e.opts.Version},
	}
	if len(instructions) > 0 {
		out["instructions"] = strings.Join(instructions, "\n\n")
	}
	b, _ := json.Marshal(out)
	return b
}

// jsonVersion returns the protocolVersion of an initialize result.
func jsonVersion(result []byte) string {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(result, &r)
	return r.ProtocolVersion
}

// startWait is how long a client's initialize waits for member m when it
// is not ready and not critical: Options.FirstStartWait on its first
// start, else Options.StartWait.
func (e *Endpoint) startWait(m *Member) time.Duration {
	if m.FirstStart != nil && m.FirstStart() {
		return e.opts.FirstStartWait
	}
	return e.opts.StartWait
}

// startInitLocked initializes member mc for the session, which the client
// initialized before mc was ready. Called with c.mu held.
func (c *clientSession) startInitLocked(mc *member) {
	mc.initing = true
	go c.initMember(mc, c.initParams)
}

// initMember initializes a member that came up after the client's
// initialize: the client's initialize, its notifications/initialized and
// logging level, as if it had been there; then the client hears of its
// lists.
func (c *clientSession) initMember(mc *member, params []byte) {
	ctx, cancel := c.memberCtxOf(c.ctx, mc)
	defer cancel()
	result, err := c.callMember(ctx, mc, protocol.MethodInitialize, params)
	c.mu.Lock()
	mc.initing = false
	if c.closed {
		c.mu.Unlock()
		return
	}
	if err != nil {
		mc.failed = "its initialize failed: " + strings.TrimPrefix(err.Error(), "mcpgate: ")
		c.mu.Unlock()
		c.e.logHidden(mc, err)
		return
	}
	mc.up, mc.failed, mc.caps = true, "", parseCaps(result)
	for k := range numKinds {
		mc.lists[k].reset()
	}
	c.epoch++
	if c.members[mc.i] == mc && c.visibleLocked(mc.i) {
		c.notifyLocked(mc.caps.kinds())
	}
	initialized := c.initialized
	c.mu.Unlock()
	c.e.rememberCaps(mc, mc.caps)
	if initialized {
		if msg, err := jsonrpc.Parse(jsonrpc.Notification(protocol.NotificationInitialized, nil)); err == nil {
			mc.conn.Handle(ctx, &msg, nil)
		}
	}
	c.mu.Lock()
	if c.members[mc.i] == mc && c.visibleLocked(mc.i) {
		c.applyLevelLocked(mc) // after initialized, as a client would
		c.resubscribeLocked(mc)
	}
	c.mu.Unlock()
}
