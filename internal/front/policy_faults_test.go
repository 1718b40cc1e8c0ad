package front

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// denySecret is a Policy that hides the items named "secret" (and
// resources "file:///secret").
type denySecret struct{}

func (denySecret) Allows(_ *auth.Principal, _, name string, _ json.RawMessage) bool {
	return name != "secret" && name != "file:///secret"
}
func (denySecret) AllowsAll(*auth.Principal, string) bool { return false }

// faultsList returns the listStream of a tools/list under denySecret.
func faultsList(kind, array, key string) *listStream {
	c := &guardedConn{policy: func(string) conn.Policy { return denySecret{} }, target: "s"}
	return &listStream{c: c, pol: denySecret{}, kind: kind, array: array, key: key}
}

// Malformed list replies from the server never crash the filter, and
// whatever it passes on never carries a denied item where a client would
// read it as one.
func TestPolicyFaultsMalformedListReplies(t *testing.T) {
	l := faultsList(policyTool, "tools", "name")
	for _, reply := range []string{
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","id":1,"result":[{"name":"secret"}]}`,
		`{"jsonrpc":"2.0","id":1,"result":"x"}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":null}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"secret"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[1,"secret",null,[],{},{"name":7},{"name":null},{"name":"secret"},{"name":"ok"}],"nextCursor":"c"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"se\u0063ret"},{"Name":"secret","name":"ok2"}]}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"tools":[{"name":"secret"}]}}}`,
		`not json`,
		``,
	} {
		out := string(l.filter([]byte(reply)))
		var env struct {
			Result struct {
				Tools []map[string]any `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(out), &env) == nil {
			for _, it := range env.Result.Tools {
				if it["name"] == "secret" {
					t.Errorf("%s: the denied tool is in %s", reply, out)
				}
			}
		}
		if strings.Contains(reply, `"ok"`) && !strings.Contains(out, `"ok"`) {
			t.Errorf("%s: the allowed tool is gone: %s", reply, out)
		}
	}
	huge := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + strings.Repeat(`{"name":"secret"},{"name":"ok"},`, 50000) + `{"name":"ok"}]}}`
	if out := l.filter([]byte(huge)); strings.Contains(string(out), `"secret"`) {
		t.Error("the huge list keeps the denied tool")
	}
}

// The filter reads the result into a map (duplicate names: the last wins)
// and passes the server's bytes on unchanged when that map needs no
// change: a result with two "tools" members, the first carrying a denied
// tool and the last none, reaches the client as it was, and a client
// that keeps the first member (or reads the stream as it comes) sees the
// denied tool. The same with the duplicate written with an escape.
func TestPolicyFaultsDuplicateListMemberLeaks(t *testing.T) {
	l := faultsList(policyTool, "tools", "name")
	for _, reply := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"secret"}],"tools":[]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"secret"}],"t\u006fols":[{"name":"ok"}]}}`,
	} {
		if out := string(l.filter([]byte(reply))); strings.Contains(out, `"secret"`) {
			t.Errorf("a denied tool passes in a duplicate member: %s", out)
		}
	}
}

// named must find the item a server will act on. A server reads the
// exact member names ("name", "uri", "arguments", "ref", "type"), as the
// TypeScript and Python SDKs do, or case-insensitively (Go's
// encoding/json, taking the last of several). Each message below names,
// to some server, the denied item "secret" (or file:///secret): named
// must say so, or refuse the request as ambiguous.
func TestPolicyFaultsNamedCaseFold(t *testing.T) {
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"secret","Name":"ok"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"secret","NAME":"ok"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///secret","URI":"file:///ok"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///secret","Uri":"file:///ok"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"secret","Name":"ok"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","Type":"ref/none","name":"secret"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///secret"},"Ref":{"type":"ref/resource","uri":"file:///ok"}}}`,
	} {
		msg, err := jsonrpcParse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		kind, name, _, ok, err := named(msg.MethodName(), msg)
		if err != nil {
			continue // refused as ambiguous: the server never sees it
		}
		if !ok || denySecret.Allows(denySecret{}, nil, kind, name, nil) {
			t.Errorf("%s: named gives %q %q (ok %v): the policy checks an item the server will not use", raw, kind, name, ok)
		}
	}
}

func jsonrpcParse(s string) (*jsonrpc.Message, error) {
	m, err := jsonrpc.Parse([]byte(s))
	return &m, err
}
