package front

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/admission"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file validates the Mcp-Param-{Name} headers of stateless
// (2026-07-28) tools/call requests against the tool's inputSchema, for
// every kind of server: a stdio process never sees the headers, so the
// gateway, which reads the body, is the server the spec holds to "reject
// a request whose headers and body disagree". The schemas are those of
// the tools/list replies the gateway relayed on each target (a tool's
// entry is replaced by every newer list naming it); a call to a tool no
// relayed list has named yet is looked for in a list of the gateway's own
// (paramfetch.go), and forwarded unchecked if still unknown, as the spec
// has an intermediary do with headers it does not recognize.

// The cache is kept per target and principal (paramKey): what a principal
// may use is what its own lists show, and a tool another principal's
// policy hides from it must not have its headers checked for it (the
// refusal would name the tool's annotated arguments where the policy says
// the tool does not exist: found by TestParamHeadersPerPrincipal).

// maxParamKeys bounds the (target, principal) pairs remembered, and
// maxParamTotal the tools remembered for all of them (a server of 4,096
// tools listed by 1,024 principals would otherwise cost 4 million
// entries): past either, every entry is dropped (counted in
// paramTools.resets) and the cache starts again.
const (
	maxParamKeys  = 1024
	maxParamTotal = 16 * maxParamTools
)

// paramKey is the cache's key of target for the principal whose owner key
// (admission.PrincipalKey; "" without authentication) is owner.
func paramKey(target, owner string) string { return target + "\x00" + owner }

// paramKeyOf is the cache's key of target for the request of ctx.
func (h *Handler) paramKeyOf(ctx context.Context, target string) string {
	owner := ""
	if h.authenticator() != nil {
		owner = admission.PrincipalKey(conn.Principal(ctx))
	}
	return paramKey(target, owner)
}

// maxParamTools bounds the tools remembered per target. Over it, the
// target's entries are dropped and the list starts again (counted in
// paramTools.resets): a server listing more tools than that has its
// headers checked for the tools of its latest lists only.
const maxParamTools = 4096

// paramTools is the per-target cache of the tools' x-mcp-header
// annotations. The zero value is ready to use.
type paramTools struct {
	mu sync.Mutex
	// guarded by mu: paramKey -> tool name -> its annotations (nil: none,
	// or an invalid annotation, which clients exclude the tool for).
	byTarget map[string]map[string][]eras.ParamHeader

	total  int           // guarded by mu: the tools in byTarget, all keys together
	resets atomic.Uint64 // targets whose entries were dropped at maxParamTools, maxParamKeys or maxParamTotal
	// annotated: some relayed list had a tool with Mcp-Param annotations
	// (set by observe, never cleared). Until then a call without Mcp-Param
	// headers has nothing to be checked against, and checkParamHeaders
	// neither decodes its params nor takes mu.
	annotated atomic.Bool
	joined    atomic.Uint64 // calls that waited for a list of the gateway's under way (paramfetch.go)

	fetched map[string]time.Time     // guarded by mu: when each target was last listed by the gateway (paramfetch.go)
	flights map[string]chan struct{} // guarded by mu: each target's list under way, closed when it ends
}

// observe records the tools of a tools/list reply relayed on target (a
// paramKey). A reply that is not a list result changes nothing.
func (p *paramTools) observe(target string, reply []byte) {
	var env struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(reply, &env) != nil || len(env.Result.Tools) == 0 {
		return
	}
	type entry struct {
		name   string
		params []eras.ParamHeader
	}
	entries := make([]entry, 0, len(env.Result.Tools))
	for _, tool := range env.Result.Tools {
		if tool.Name == "" {
			continue
		}
		params, err := eras.ParamHeaders(tool.InputSchema)
		if err != nil {
			params = nil // an invalid tool: clients exclude it and send no headers
		}
		entries = append(entries, entry{tool.Name, params})
		if len(params) > 0 {
			p.annotated.Store(true)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTarget == nil {
		p.byTarget = map[string]map[string][]eras.ParamHeader{}
	}
	tools := p.byTarget[target]
	// Only names the cache lacks count against the bounds: a server's
	// lists named again (every client lists) must not start it over each
	// time, which dropped the tools of its other pages until listed again.
	added := 0
	for _, e := range entries {
		if _, known := tools[e.name]; !known {
			added++
		}
	}
	if tools == nil && len(p.byTarget) >= maxParamKeys || p.total+added > maxParamTotal {
		clear(p.byTarget)
		p.total, tools, added = 0, nil, len(entries)
		p.resets.Add(1)
	}
	if tools == nil || len(tools)+added > maxParamTools {
		if tools != nil {
			p.resets.Add(1)
		}
		p.total -= len(tools)
		tools = make(map[string][]eras.ParamHeader, len(entries))
		p.byTarget[target] = tools
	}
	for _, e := range entries[:min(len(entries), maxParamTools)] {
		if _, known := tools[e.name]; !known {
			p.total++
		}
		tools[e.name] = e.params
	}
}

// lookup returns the annotations of tool on target, and whether a relayed
// list named the tool.
func (p *paramTools) lookup(target, tool string) ([]eras.ParamHeader, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	params, ok := p.byTarget[target][tool]
	return params, ok
}

// forget drops what is known of target's tools (its server was
// replaced), for every principal.
func (p *paramTools) forget(target string) {
	prefix := paramKey(target, "")
	p.mu.Lock()
	for key, tools := range p.byTarget {
		if strings.HasPrefix(key, prefix) {
			p.total -= len(tools)
			delete(p.byTarget, key)
		}
	}
	for key := range p.fetched {
		if strings.HasPrefix(key, prefix) {
			delete(p.fetched, key)
		}
	}
	p.mu.Unlock()
}

// checkParamHeaders returns the Problem refusing stateless request msg
// (req as eras.Check read it) on target when its Mcp-Param headers
// disagree with its arguments, or nil. A tool no relayed list named is
// looked for in a list of the gateway's own through be first, when the
// request has Mcp-Param headers (its client knows the tool's schema: it is
// not the first call of a client that has not listed tools, which the
// spec has send none) and be serves stateless requests (paramfetch.go).
func (h *Handler) checkParamHeaders(ctx context.Context, target string, be conn.Backend, header http.Header, msg *jsonrpc.Message, req eras.Request) *eras.Problem {
	if req.Method != protocol.MethodToolsCall {
		return nil
	}
	if !h.paramTools.annotated.Load() && !hasParamHeader(header) {
		// No tool is known to ask for headers, and the client sends none
		// (it would fetch no list): nothing to check.
		return nil
	}
	p, err := conn.ReadParams(msg) // strictly, as the policy reads the name (params.go)
	if err != nil {
		return nil // refused with -32602 where the name is read again
	}
	key := h.paramKeyOf(ctx, target)
	params, ok := h.paramTools.lookup(key, p.Name)
	if !ok && be.ServesStateless() && hasParamHeader(header) {
		h.listForParams(ctx, key, be, req, p.Name)
		params, ok = h.paramTools.lookup(key, p.Name)
	}
	if !ok || len(params) == 0 {
		return nil
	}
	return eras.CheckParamHeaders(header, params, p.Arguments)
}

// hasParamHeader reports whether header has an Mcp-Param-* header.
func hasParamHeader(header http.Header) bool {
	for k := range header {
		if len(k) > len(eras.ParamHeaderPrefix) && strings.EqualFold(k[:len(eras.ParamHeaderPrefix)], eras.ParamHeaderPrefix) {
			return true
		}
	}
	return false
}
