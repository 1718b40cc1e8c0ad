package front

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// toolsPage is a tools/list reply naming tools t<from> to t<to-1>, each
// with an x-mcp-header annotation on its "region".
func toolsPage(from, to int) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	for i := from; i < to; i++ {
		if i > from {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// A server of 4,000 tools in pages of 1,000, listed again and again (each
// client lists; many read the first page only): the tools stay known, and
// a call of one on the last page with a header disagreeing with its
// arguments stays refused. On the old code every page after the first
// round counted its names again, over maxParamTools: the cache started
// over on each, the last page's tools were forgotten, and the call went
// unchecked (a reset counted per list).
func TestParamToolsRelistedKeepsEveryPage(t *testing.T) {
	var p paramTools
	for range 3 {
		for from := 0; from < 4000; from += 1000 {
			p.observe("big", toolsPage(from, from+1000))
		}
		p.observe("big", toolsPage(0, 1000)) // a client reading one page
	}
	if n := p.resets.Load(); n != 0 {
		t.Errorf("%d resets for a server of 4,000 tools listed again", n)
	}
	params, ok := p.lookup("big", "t3999")
	if !ok {
		t.Fatal("the last page's tool forgotten")
	}
	h := http.Header{}
	h.Set("Mcp-Param-Region", "us")
	if prob := eras.CheckParamHeaders(h, params, []byte(`{"region":"eu"}`)); prob == nil {
		t.Errorf("a disagreeing header of t3999 not refused")
	}
	// A server that really lists more than the bound still starts over.
	p.observe("big", toolsPage(4000, 4000+maxParamTools))
	if n := p.resets.Load(); n != 1 {
		t.Errorf("%d resets past maxParamTools, want 1", n)
	}
}

// The (target, principal) pairs are bounded: principals without end (a
// token issuer's every subject) cannot grow the cache without end.
func TestParamToolsKeysBounded(t *testing.T) {
	var p paramTools
	for i := range 3 * maxParamKeys {
		p.observe(paramKey("s", fmt.Sprint("key\x00p", i)), toolsPage(0, 1))
	}
	p.mu.Lock()
	n := len(p.byTarget)
	p.mu.Unlock()
	if n > maxParamKeys {
		t.Errorf("%d keys kept, bound %d", n, maxParamKeys)
	}
	if p.resets.Load() == 0 {
		t.Errorf("the keys dropped uncounted")
	}

	// A server of maxParamTools tools listed by principal after
	// principal: the tools kept for all of them stay bounded, and the
	// count of them is true.
	big := toolsPage(0, maxParamTools)
	for i := range maxParamTotal/maxParamTools + 2 {
		p.observe(paramKey("big", fmt.Sprint("key\x00p", i)), big)
		p.mu.Lock()
		sum := 0
		for _, tools := range p.byTarget {
			sum += len(tools)
		}
		total := p.total
		p.mu.Unlock()
		if sum != total || total > maxParamTotal {
			t.Fatalf("after %d principals: %d tools kept, counted %d, bound %d", i+1, sum, total, maxParamTotal)
		}
	}
	p.forget("big")
	p.mu.Lock()
	defer p.mu.Unlock()
	sum := 0
	for _, tools := range p.byTarget {
		sum += len(tools)
	}
	if sum != p.total {
		t.Errorf("after forget: %d tools kept, counted %d", sum, p.total)
	}
}

// heldLister is a Backend of the stateless revision only whose tools/list replies wait for
// release: a server slow to list (a first npx start). It lists "where",
// whose "message" is annotated Message.
type heldLister struct {
	conn.OwnerBound
	listed  chan struct{} // gets a value when a tools/list arrives
	release chan struct{}
	lists   atomic.Int64
}

func (b *heldLister) Open(context.Context, conn.Stream) (conn.Conn, error) {
	return nil, errors.New("stateless only")
}

func (b *heldLister) OpenStateless(context.Context, conn.Stream, string, []byte) (conn.StatelessConn, error) {
	c := heldListerConn{b}
	return conn.NewStatelessConn(c, c.ServerInit, c.Passthrough()), nil
}

func (b *heldLister) ServesStateless() bool { return true }

type heldListerConn struct{ b *heldLister }

func (c heldListerConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind != jsonrpc.KindRequest || !msg.MethodIs("tools/list") {
		return
	}
	c.b.lists.Add(1)
	c.b.listed <- struct{}{}
	id := bytes.Clone(msg.Bytes(msg.ID))
	go func() {
		select {
		case <-c.b.release:
		case <-ctx.Done():
			out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, "cancelled"))
			return
		}
		out.Reply(jsonrpc.Response(id, []byte(`{"tools":[{"name":"where","inputSchema":{"type":"object","properties":{"message":{"type":"string","x-mcp-header":"Message"}}}}]}`)))
	}()
}
func (heldListerConn) Version() string                            { return "2026-07-28" }
func (heldListerConn) Abandon(conn.Stream)                        {}
func (heldListerConn) Close()                                     {}
func (heldListerConn) CloseWith(string)                           {}
func (heldListerConn) ServerInit(context.Context) ([]byte, error) { return []byte(testInit), nil }
func (heldListerConn) Passthrough() bool                          { return true }

// A call with a disagreeing Mcp-Param header, sent while the gateway
// lists the target for another call, waits for that list and is refused;
// so is one sent after a call that made the gateway list and hung up at
// once. On the old code the first went through unchecked (the list was
// claimed, the tool not known yet), and the second's list was cancelled
// with its caller, leaving every call unchecked for paramRefetch.
func TestParamFetchJoinedByConcurrentCalls(t *testing.T) {
	h := New(Config{Logger: slog.New(slog.DiscardHandler)})
	call, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"where","arguments":{"message":"hi"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req := eras.Request{Method: "tools/call", Version: "2026-07-28", Capabilities: []byte(`{}`)}
	header := http.Header{}
	header.Set("Mcp-Param-Message", "ho")
	check := func(ctx context.Context, target string, be conn.Backend) *eras.Problem {
		return h.checkParamHeaders(ctx, target, be, header, &call, req)
	}

	// Beside a list under way.
	be := &heldLister{listed: make(chan struct{}, 4), release: make(chan struct{})}
	first, second := make(chan *eras.Problem, 1), make(chan *eras.Problem, 1)
	go func() { first <- check(context.Background(), "a", be) }()
	<-be.listed
	go func() { second <- check(context.Background(), "a", be) }()
	testkit.WaitFor(t, "the second call to wait for the list", func() bool { return h.paramTools.joined.Load() == 1 })
	select {
	case prob := <-second:
		t.Fatalf("the call beside the list answered before it ended: %v", prob)
	case <-be.listed:
		t.Fatal("a second list")
	default:
	}
	close(be.release)
	for name, ch := range map[string]chan *eras.Problem{"first": first, "second": second} {
		if prob := <-ch; prob == nil || prob.Code != protocol.CodeHeaderMismatch {
			t.Errorf("%s call: %v, want the header mismatch", name, prob)
		}
	}

	// After a caller that hung up at once.
	be = &heldLister{listed: make(chan struct{}, 4), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan struct{})
	go func() { check(ctx, "b", be); close(gone) }()
	<-be.listed
	cancel()
	close(be.release)
	<-gone
	if prob := check(context.Background(), "b", be); prob == nil || prob.Code != protocol.CodeHeaderMismatch {
		t.Errorf("after a caller that left: %v, want the header mismatch", prob)
	}
	if n := be.lists.Load(); n != 1 {
		t.Errorf("%d lists, want 1", n)
	}
}
