package front

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// A stateless tools/call with Mcp-Param headers may name a tool no list
// relayed on its target has named yet (the gateway restarted, or the
// client kept the schema from before, as the spec allows). Its headers are
// then checked after the gateway lists the target's tools itself, once: a connection of
// its own, the call's version and capabilities, up to paramListPages pages
// or until the tool shows up, within paramListTimeout. So that calls of
// names no server has cannot make the gateway list tools on every call, a
// target is listed at most once per paramRefetch; a call that finds the
// tool still unknown goes unchecked, as a header no annotation names. A
// call that comes while the target is being listed waits for that list
// (within its own context): it went unchecked, and a client sending its
// disagreeing call beside one that makes the gateway list had it through
// (found by TestParamFetchJoinedByConcurrentCalls).

const (
	paramRefetch     = 10 * time.Second
	paramListPages   = 10
	paramListTimeout = 10 * time.Second
)

// claimFetch reports whether target may be listed now, and if so records
// that it is, with the channel to close when the list ends (endFetch);
// if not, it returns the channel of the list under way, if any.
func (p *paramTools) claimFetch(target string, now time.Time) (chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fetched == nil {
		p.fetched, p.flights = map[string]time.Time{}, map[string]chan struct{}{}
	}
	if last, ok := p.fetched[target]; ok && now.Sub(last) < paramRefetch {
		return p.flights[target], false
	}
	if len(p.fetched) >= maxParamTools {
		clear(p.fetched) // a bound, not a schedule: targets are few
	}
	p.fetched[target] = now
	done := make(chan struct{})
	p.flights[target] = done
	return done, true
}

// endFetch ends the list of target that claimFetch gave done.
func (p *paramTools) endFetch(target string, done chan struct{}) {
	p.mu.Lock()
	if p.flights[target] == done {
		delete(p.flights, target)
	}
	p.mu.Unlock()
	close(done)
}

// listForParams lists target's tools through sb for tool's annotations
// (see above), feeding every page to the cache; target is a paramKey (the
// list is the request's principal's: ctx carries it).
func (h *Handler) listForParams(ctx context.Context, target string, sb conn.Backend, req eras.Request, tool string) {
	done, mine := h.paramTools.claimFetch(target, time.Now())
	if !mine {
		if done != nil {
			h.paramTools.joined.Add(1)
			select {
			case <-done:
			case <-ctx.Done():
			}
		}
		return
	}
	defer h.paramTools.endFetch(target, done)
	// Not ended by the caller leaving: the list is claimed for
	// paramRefetch, so a client that made the gateway list and hung up at
	// once would have its next calls go unchecked that long. It keeps the
	// caller's values (its principal: the list is that principal's).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), paramListTimeout)
	defer cancel()
	conn, err := sb.OpenStateless(ctx, discardStream{}, req.Version, req.Capabilities)
	if err != nil {
		return
	}
	defer conn.Close()
	meta, _ := json.Marshal(map[string]json.RawMessage{
		protocol.MetaProtocolVersion:    mustJSON(req.Version),
		protocol.MetaClientCapabilities: capsOrEmpty(req.Capabilities),
	})
	cursor := ""
	for range paramListPages {
		params := `{"_meta":` + string(meta)
		if cursor != "" {
			params += `,"cursor":` + string(mustJSON(cursor))
		}
		raw := jsonrpc.Request([]byte(`1`), protocol.MethodToolsList, []byte(params+"}"))
		msg, err := jsonrpc.Parse(raw)
		if err != nil {
			return
		}
		if msg, err = eras.Upstream(conn, &msg); err != nil {
			return
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
