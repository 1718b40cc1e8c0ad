package front

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// prettyBackend is a fakeBackend whose server answers "pretty" with an
// indented reply over several lines, and "prettyStream" with an indented
// notification first (so the answer is a stream): what a stdio server
// cannot send (its messages are lines) and a remote one can.
type prettyBackend struct{ *fakeBackend }

func (b prettyBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	c, err := b.fakeBackend.Open(ctx, general)
	if err != nil {
		return nil, err
	}
	return prettyConn{c.(*fakeConn)}, nil
}

type prettyConn struct{ *fakeConn }

// prettyNote is the indented notification of "prettyStream".
const prettyNote = "{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"notifications/message\",\n  \"params\": {\n\t\"level\": \"info\",\n\t\"data\": \"a\\nb\"\n  }\n}"

// prettyReply is the indented reply to id.
func prettyReply(id string) string {
	return "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": " + id + ",\n  \"result\": {\n    \"content\": [\n      {\"type\": \"text\", \"text\": \"x\\u00e9\"}\n    ]\n  }\n}"
}

func (c prettyConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch msg.MethodName() {
	case "prettyStream":
		out.Send([]byte(prettyNote))
		fallthrough
	case "pretty":
		out.Reply([]byte(prettyReply(string(msg.Bytes(msg.ID)))))
	default:
		c.fakeConn.Handle(ctx, msg, out)
	}
}

// An owner's answer with line breaks inside its messages passes through
// the replica that forwarded the request as the owner wrote it: a JSON
// body byte for byte, a stream's events each whole (SSE splits a message
// on its line breaks and the client joins the lines again).
func TestForwardedPrettyReplies(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, prettyBackend{newFakeBackend()})
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	sid := initSession(t, a.srv)
	for _, tt := range []struct {
		method, id string
		want       []string
	}{
		{"pretty", `1.0`, []string{prettyReply(`1.0`)}},
		{"prettyStream", `"x\u00e9"`, []string{prettyNote, prettyReply(`"x\u00e9"`)}},
	} {
		for _, r := range []*replica{b, a} {
			resp, body := do(t, r.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":`+tt.id+`,"method":"`+tt.method+`"}`,
				"Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
			var got []string
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				sr := sse.NewReader(strings.NewReader(body), 0)
				for {
					ev, err := sr.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("%s: the stream: %v", tt.method, err)
					}
					if len(ev.Data) > 0 {
						got = append(got, string(ev.Data))
					}
				}
			} else {
				got = []string{body}
			}
			if strings.Join(got, "\x00") != strings.Join(tt.want, "\x00") {
				t.Errorf("%s through %s: %d %q\nwant %q", tt.method, r.srv.URL, resp.StatusCode, got, tt.want)
			}
		}
	}
	if f := b.h.Forwards(); f.Forwarded != 2 {
		t.Errorf("forwards: %+v, want the two calls forwarded", f)
	}
}
