package httpapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/modern"
)

// A stateless tools/call with Mcp-Param headers may name a tool no list
// relayed on its target has named yet (the gateway restarted, or the
// client kept the schema from before, as the spec allows). Its headers are
// then checked after the gateway lists the target's tools itself, once: a connection of
// its own, the call's version and capabilities, up to paramListPages pages
// or until the tool shows up, within paramListTimeout. So that calls of
// names no server has cannot make the gateway list tools on every call, a
// target is listed at most once per paramRefetch; a call that finds the
// tool still unknown goes unchecked, as a header no annotation names.

const (
	paramRefetch     = 10 * time.Second
	paramListPages   = 10
	paramListTimeout = 10 * time.Second
)

// claimFetch reports whether target may be listed now, and if so records
// that it is.
func (p *paramTools) claimFetch(target string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fetched == nil {
		p.fetched = map[string]time.Time{}
	}
	if last, ok := p.fetched[target]; ok && now.Sub(last) < paramRefetch {
		return false
	}
	if len(p.fetched) >= maxParamTools {
		clear(p.fetched) // a bound, not a schedule: targets are few
	}
	p.fetched[target] = now
	return true
}

// listForParams lists target's tools through sb for tool's annotations
// (see above), feeding every page to the cache; target is a paramKey (the
// list is the request's principal's: ctx carries it).
func (h *Handler) listForParams(ctx context.Context, target string, sb StatelessBackend, req modern.Request, tool string) {
	if !h.paramTools.claimFetch(target, time.Now()) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, paramListTimeout)
	defer cancel()
	conn, err := sb.OpenStateless(ctx, discardStream{}, req.Version, req.Capabilities)
	if err != nil {
		return
	}
	defer conn.Close()
	meta, _ := json.Marshal(map[string]json.RawMessage{
		modern.KeyProtocolVersion:    mustJSON(req.Version),
		modern.KeyClientCapabilities: capsOrEmpty(req.Capabilities),
	})
	cursor := ""
	for range paramListPages {
		params := `{"_meta":` + string(meta)
		if cursor != "" {
			params += `,"cursor":` + string(mustJSON(cursor))
		}
		raw := jsonrpc.Request([]byte(`1`), "tools/list", []byte(params+"}"))
		msg, err := jsonrpc.Parse(raw)
		if err != nil {
			return
		}
		if !conn.Passthrough() {
			if msg, err = jsonrpc.Parse(modern.ToLegacy(nil, &msg)); err != nil {
				return
			}
		}
		out := &replyOnce{got: make(chan []byte, 1)}
		conn.Handle(ctx, &msg, out)
		var reply []byte
		select {
		case reply = <-out.got:
		case <-ctx.Done():
			conn.Abandon(out)
			return
		}
		h.paramTools.observe(target, reply)
		if _, ok := h.paramTools.lookup(target, tool); ok {
			return
		}
		var page struct {
			Result struct {
				NextCursor string `json:"nextCursor"`
			} `json:"result"`
		}
		if json.Unmarshal(reply, &page) != nil || page.Result.NextCursor == "" {
			return
		}
		cursor = page.Result.NextCursor
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func capsOrEmpty(caps []byte) json.RawMessage {
	if len(caps) == 0 {
		return json.RawMessage(`{}`)
	}
	return caps
}

// replyOnce is the Stream of the gateway's own list request: it keeps the
// reply and drops everything else (progress, log messages; a server
// request on it is left unanswered, and answered by the connection's
// close).
type replyOnce struct{ got chan []byte }

func (r *replyOnce) Send([]byte) {}
func (r *replyOnce) Reply(msg []byte) {
	select {
	case r.got <- msg:
	default:
	}
}

// discardStream drops what a connection of the gateway's own gets outside
// its requests.
type discardStream struct{}

func (discardStream) Send([]byte)  {}
func (discardStream) Reply([]byte) {}
