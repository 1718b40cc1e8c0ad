package eras

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// sessionSC is a connection to a server of the session eras for
// OpenListen: its initialize result, and its answers to resources/subscribe
// (refused for URIs under "deny:").
type sessionSC struct {
	init    string
	initErr error
	subs    []string // the URIs it was asked to subscribe to
}

func (sc *sessionSC) Handle(_ context.Context, msg *jsonrpc.Message, out conn.Stream) {
	var p struct {
		Params struct{ URI string } `json:"params"`
	}
	_ = json.Unmarshal(msg.Raw, &p)
	sc.subs = append(sc.subs, p.Params.URI)
	if !msg.MethodIs("resources/subscribe") || strings.HasPrefix(p.Params.URI, "deny:") {
		out.Reply(jsonrpc.ErrorResponse(msg.Bytes(msg.ID), protocol.CodeInvalidParams, "no"))
		return
	}
	out.Reply(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{}`)))
}
func (sc *sessionSC) Version() string     { return "2025-11-25" }
func (sc *sessionSC) Abandon(conn.Stream) {}
func (sc *sessionSC) Close()              {}
func (sc *sessionSC) CloseWith(string)    {}

// stateless is sc as the stateless connection OpenListen takes.
func (sc *sessionSC) stateless() conn.StatelessConn {
	return conn.NewStatelessConn(sc, sc.ServerInit, sc.Passthrough())
}
func (sc *sessionSC) Passthrough() bool { return false }
func (sc *sessionSC) ServerInit(context.Context) ([]byte, error) {
	return []byte(sc.init), sc.initErr
}

func listenRequest(t *testing.T, raw string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return &m
}

// TestOpenListen: the acknowledgement names what the server can deliver
// (its capabilities, and the URIs it agreed to subscribe), notifications
// pass when the listen wants them, tagged with its id byte for byte, and
// the end carries the id twice.
func TestOpenListen(t *testing.T) {
	sc := &sessionSC{init: `{"capabilities":{"tools":{"listChanged":true},"prompts":{},"resources":{"subscribe":true}}}`}
	msg := listenRequest(t, `{"jsonrpc":"2.0","id":"L-1","method":"subscriptions/listen","params":{"notifications":`+
		`{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["file:///a/","deny:x"]}}}`)
	l, prob := OpenListen(context.Background(), sc.stateless(), msg)
	if prob != nil {
		t.Fatalf("OpenListen: %+v", prob)
	}
	if got := strings.Join(sc.subs, " "); got != "file:///a/ deny:x" {
		t.Errorf("subscribed %q, want file:///a/ and deny:x", got)
	}
	wantAck := `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L-1"},` +
		`"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///a/"]}}}`
	if got := string(l.Ack()); got != wantAck {
		t.Errorf("ack\n%s\nwant\n%s", got, wantAck)
	}
	for _, tt := range []struct {
		note string
		pass bool
	}{
		{`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a/b"}}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"deny:x"}}`, false},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, false},
		{`not json`, false},
	} {
		got, ok := l.Forward([]byte(tt.note))
		if ok != tt.pass {
			t.Errorf("Forward(%s) = %v, want %v", tt.note, ok, tt.pass)
			continue
		}
		if ok && !strings.Contains(string(got), `"_meta":{"io.modelcontextprotocol/subscriptionId":"L-1"}`) {
			t.Errorf("Forward(%s) = %s: not tagged with the listen's id", tt.note, got)
		}
	}
	wantEnd := `{"jsonrpc":"2.0","id":"L-1","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"L-1"}}}`
	if got := string(l.End()); got != wantEnd {
		t.Errorf("end %s, want %s", got, wantEnd)
	}
}

// TestOpenListenRefusedURIFirst: a URI the server refuses is left out
// of the acknowledgement without costing the URIs after it their
// subscription: each is asked for once, whatever its place.
func TestOpenListenRefusedURIFirst(t *testing.T) {
	sc := &sessionSC{init: `{"capabilities":{"resources":{"subscribe":true}}}`}
	msg := listenRequest(t, `{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":`+
		`{"resourceSubscriptions":["deny:x","file:///a/","deny:y","file:///b/"]}}}`)
	l, prob := OpenListen(context.Background(), sc.stateless(), msg)
	if prob != nil {
		t.Fatalf("OpenListen: %+v", prob)
	}
	if got, want := strings.Join(sc.subs, " "), "deny:x file:///a/ deny:y file:///b/"; got != want {
		t.Errorf("subscribed %q, want %q", got, want)
	}
	wantAck := `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":2},` +
		`"notifications":{"resourceSubscriptions":["file:///a/","file:///b/"]}}}`
	if got := string(l.Ack()); got != wantAck {
		t.Errorf("ack\n%s\nwant\n%s", got, wantAck)
	}
}

// TestOpenListenRefusals: a listen without a filter is a 400, and one on a
// server that is not up a 503 naming why; neither subscribes anything.
func TestOpenListenRefusals(t *testing.T) {
	sc := &sessionSC{init: `{"capabilities":{}}`}
	_, prob := OpenListen(context.Background(), sc.stateless(), listenRequest(t, `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`))
	if prob == nil || prob.Status != http.StatusBadRequest || prob.Code != protocol.CodeInvalidParams {
		t.Errorf("no filter: %+v, want 400 invalid params", prob)
	}
	sc.initErr = errors.New("mcpgate: the server is starting")
	_, prob = OpenListen(context.Background(), sc.stateless(), listenRequest(t, `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["a"]}}}`))
	if prob == nil || prob.Status != http.StatusServiceUnavailable || prob.Message != sc.initErr.Error() {
		t.Errorf("server down: %+v, want 503 with its reason", prob)
	}
	if len(sc.subs) != 0 {
		t.Errorf("subscribed %q on a refused listen", sc.subs)
	}
}

// TestFilterAgreed: a server delivers the list_changed it announces, and
// resource subscriptions only if it takes subscriptions; the reverse
// bridge's listen asks for all of that (nothing when nothing is
// announced).
func TestFilterAgreed(t *testing.T) {
	all := Filter{Tools: true, Prompts: true, Resources: true, URIs: []string{"a"}}
	for _, tt := range []struct{ caps, want string }{
		{`{}`, `{}`},
		{`{"capabilities":{"tools":{"listChanged":true}}}`, `{"toolsListChanged":true}`},
		{`{"capabilities":{"tools":{},"prompts":{"listChanged":true},"resources":{"listChanged":true}}}`, `{"promptsListChanged":true,"resourcesListChanged":true}`},
		{`{"capabilities":{"resources":{"subscribe":true}}}`, `{"resourceSubscriptions":["a"]}`},
		{`not json`, `{}`},
	} {
		got, _ := json.Marshal(all.Agreed([]byte(tt.caps)))
		if string(got) != tt.want {
			t.Errorf("Agreed(%s) = %s, want %s", tt.caps, got, tt.want)
		}
	}
	if got := listenNotifications([]byte(`{"capabilities":{"resources":{}}}`), map[string]struct{}{"a": {}}); got != nil {
		t.Errorf("reverse listen on a server announcing nothing: %s, want none", got)
	}
	if got := string(listenNotifications([]byte(`{"capabilities":{"resources":{"subscribe":true}}}`), map[string]struct{}{"b": {}, "a": {}})); got != `{"resourceSubscriptions":["a","b"]}` {
		t.Errorf("reverse listen: %s, want the subscribed URIs sorted", got)
	}
}
