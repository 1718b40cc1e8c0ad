package aggregate

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// cursorBomb is a member whose tools/list pages are empty, each with a
// new nextCursor of cursorLen bytes: a list of nothing that costs the
// gateway every cursor it is handed.
type cursorBomb struct {
	conn.OwnerBound
	conn.SessionsOnly
	cursorLen int
	pages     atomic.Int64
}

func (b *cursorBomb) Open(context.Context, conn.Stream) (conn.Conn, error) {
	return &cursorBombConn{b}, nil
}

type cursorBombConn struct{ b *cursorBomb }

func (c *cursorBombConn) Handle(_ context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind != jsonrpc.KindRequest || out == nil {
		return
	}
	id := msg.Bytes(msg.ID)
	var result string
	switch {
	case msg.MethodIs("initialize"):
		result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"bomb","version":"1"}}`
	case msg.MethodIs("tools/list"):
		n := c.b.pages.Add(1)
		cursor := fmt.Sprintf("%d-", n) + strings.Repeat("c", c.b.cursorLen)
		result = `{"tools":[],"nextCursor":"` + cursor + `"}`
	default:
		go out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeMethodNotFound, "no"))
		return
	}
	reply := jsonrpc.Response(id, []byte(result))
	go out.Reply(reply) // as a connection would: not inside Handle
}

func (c *cursorBombConn) Version() string         { return "2025-06-18" }
func (c *cursorBombConn) Abandon(conn.Stream)     {}
func (c *cursorBombConn) Close()                  {}
func (c *cursorBombConn) CloseWith(reason string) {}

// A member handing out a new 64 KiB cursor with every empty page: what
// the endpoint keeps of a list while fetching it (the cursors it was
// given, to tell a loop) counts against maxListBytes, so the list is
// refused, naming the key, once they pass it. On the old code only items
// counted: the endpoint fetched and kept maxPages (1,000) cursors, 64 MiB
// for a list bounded at 1 MiB, and refused it for its page count.
func TestMemberCursorsCountAgainstMaxListBytes(t *testing.T) {
	bomb := &cursorBomb{cursorLen: 64 << 10}
	e := newEndpoint(t, Options{MaxListBytes: 1 << 20}, Member{Name: "bomb", Backend: bomb})
	cl := connect(t, e, `{}`)
	reply := cl.do(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if !strings.Contains(string(reply), "maxListBytes") {
		t.Errorf("tools/list: %.300s, want the maxListBytes refusal", reply)
	}
	if n, most := bomb.pages.Load(), int64(1<<20/(64<<10))+1; n > most {
		t.Errorf("%d pages fetched, want at most %d: the cursors kept pass the bound after that", n, most)
	}
}
