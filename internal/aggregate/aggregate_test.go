package aggregate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// builtinTools is the number of tools the fake lists.
const builtinTools = 16

// TestMergedListOnePage: two members paging their tools 3 at a time;
// one tools/list of the endpoint answers every tool of both (the endpoint
// followed their pages itself), members in config order and each member's
// tools in its own order, every name prefixed, and no nextCursor: a client
// that reads one page sees every server.
func TestMergedListOnePage(t *testing.T) {
	paged := testkit.FakeOptions{Catalog: testkit.CatalogOptions{ToolPageSize: 3}}
	a := fakeMember(t, "a", paged)
	b := fakeMember(t, "b", paged)
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{}`)

	var init struct {
		ServerInfo   struct{ Name string }
		Capabilities map[string]json.RawMessage
	}
	if err := json.Unmarshal(cl.init, &init); err != nil {
		t.Fatal(err)
	}
	if init.ServerInfo.Name != "ep" || string(init.Capabilities["tools"]) != `{"listChanged":true}` {
		t.Errorf("initialize result %s: want serverInfo naming the endpoint and tools with listChanged", cl.init)
	}

	names, pages := cl.listAll("tools/list", "tools", "name")
	if !slices.Equal(pages, []int{2 * builtinTools}) {
		t.Fatalf("page sizes %v, want one page of %d", pages, 2*builtinTools)
	}
	for j, n := range names {
		want := "a__"
		if j >= builtinTools {
			want = "b__"
		}
		if !strings.HasPrefix(n, want) {
			t.Errorf("tool %d is %q, want prefix %q (members in config order)", j, n, want)
		}
	}
	if names[0] != "a__echo" || names[builtinTools] != "b__echo" {
		t.Errorf("names %v: want each member's own order", names)
	}
	if again := cl.tools(); !slices.Equal(again, names) {
		t.Errorf("listed again: %v, want the same order %v", again, names)
	}

	// A cursor the endpoint did not give is invalid params.
	for _, bad := range []string{"nonsense", encodeCursor(7, 0), "AQ"} {
		r := cl.do(fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"cursor":%q}}`, bad))
		if !strings.Contains(string(r), `"code":-32602`) {
			t.Errorf("cursor %q: %s, want -32602", bad, r)
		}
	}
	// A member without prompts contributes none.
	if prompts, _ := cl.listAll("prompts/list", "prompts", "name"); len(prompts) != 0 {
		t.Errorf("prompts %v, want none", prompts)
	}
}

// TestCallRoutedWithIDs: a call goes to the member that owns the name,
// under the member's own name, and its reply reaches the client as the
// member gave it, with the client's id byte for byte.
func TestCallRoutedWithIDs(t *testing.T) {
	ma, mb := marker(t, "a"), marker(t, "b")
	a := fakeMember(t, "a", testkit.FakeOptions{Marker: ma, Catalog: testkit.CatalogOptions{ExtraTools: []string{"hello"}}})
	b := fakeMember(t, "b", testkit.FakeOptions{Marker: mb, Catalog: testkit.CatalogOptions{ExtraTools: []string{"hello"}}})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{}`)

	// Before any list: the endpoint loads the names itself.
	for _, id := range []string{`12345678901234567890123`, `"x\u0041y"`, `-0.5e+3`} {
		r := cl.do(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"b__pid","arguments":{}}}`)
		if !strings.HasPrefix(string(r), `{"jsonrpc":"2.0","id":`+id+`,`) {
			t.Errorf("reply %s: want the client's id %s byte for byte", r, id)
		}
		pids := testkit.Procs(mb)
		if got := text(t, r); len(pids) != 1 || got != strconv.Itoa(pids[0]) {
			t.Errorf("b__pid answered %q, want b's process %v", got, pids)
		}
	}
	if got := text(t, cl.callTool(1, "a__hello", `{"message":"hi"}`)); got != "hello: hi" {
		t.Errorf("a__hello: %q, want the member called under its own name", got)
	}
	if got := text(t, cl.callTool(2, "a__nope", `{}`)); !strings.Contains(got, "-32602") || !strings.Contains(got, `unknown tool "a__nope"`) {
		t.Errorf("unknown tool: %q", got)
	}
	if got := text(t, cl.do(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)); !strings.Contains(got, `"result":{}`) {
		t.Errorf("ping: %s", got)
	}
	if n := e.Pending(); n != 0 {
		t.Errorf("Pending %d after every request was answered", n)
	}
}

// TestCollisionReported: two members without prefixes exposing the same
// names: those are left out of the list, logged naming both, and a call
// to one gets an error naming both; the others are served.
func TestCollisionReported(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"alpha"}}})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"beta"}}})
	a.Prefix, b.Prefix = "", ""
	log, logs := newLog(t)
	e := newEndpoint(t, Options{Logger: log}, a, b)
	cl := connect(t, e, `{}`)

	if names := cl.tools(); !slices.Equal(names, []string{"alpha", "beta"}) {
		t.Errorf("tools %v, want only the names that do not collide", names)
	}
	got := text(t, cl.callTool(1, "echo", `{"message":"x"}`))
	if !strings.Contains(got, `"a"`) || !strings.Contains(got, `"b"`) || !strings.Contains(got, "ambiguous") {
		t.Errorf("call to a colliding name: %q, want an error naming both servers", got)
	}
	if got := text(t, cl.callTool(2, "beta", `{"message":"x"}`)); got != "beta: x" {
		t.Errorf("beta: %q", got)
	}
	l := logs.String()
	if !strings.Contains(l, "collision") || !strings.Contains(l, `\"a\" (\"echo\")`) || !strings.Contains(l, `\"b\" (\"echo\")`) {
		t.Errorf("log %s: want the collision logged naming both servers", l)
	}
}

// TestLongNameShortened: a name over 64 characters is shortened with a
// stable hash and still calls the member's own name.
func TestLongNameShortened(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 4) + "end" // 83 characters
	a := fakeMember(t, "a", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{long, long + "2"}}})
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	var short []string
	for _, n := range cl.tools() {
		if len(n) > 64 {
			t.Errorf("exposed name %q is %d bytes, over 64", n, len(n))
		}
		if strings.HasPrefix(n, "a__very_long") {
			short = append(short, n)
		}
	}
	if len(short) != 2 || short[0] == short[1] {
		t.Fatalf("shortened names %v: want two distinct ones", short)
	}
	if want := (naming{sep: "__", max: 64}).expose("a", long); short[0] != want || len(want) != 64 {
		t.Errorf("shortened %q, want %q (64 bytes, stable)", short[0], want)
	}
	if got := text(t, cl.callTool(1, short[0], `{"message":"m"}`)); got != long+": m" {
		t.Errorf("call of the shortened name: %q, want the member's own name called", got)
	}
	if got := text(t, cl.callTool(2, short[1], `{"message":"m"}`)); got != long+"2: m" {
		t.Errorf("call of the second shortened name: %q", got)
	}
}

// TestSnakeCase: names in snake_case, called back by their exact original
// names; two names of one member that become the same are reported.
func TestSnakeCase(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"getUserInfo", "fooBar", "foo-bar"}}})
	a.Prefix = "MyServer"
	e := newEndpoint(t, Options{SnakeCase: true}, a)
	cl := connect(t, e, `{}`)
	names := cl.tools()
	if !slices.Contains(names, "my_server__get_user_info") || slices.Contains(names, "my_server__foo_bar") {
		t.Errorf("tools %v: want my_server__get_user_info, and foo_bar left out (two names map to it)", names)
	}
	if got := text(t, cl.callTool(1, "my_server__get_user_info", `{"message":"m"}`)); got != "getUserInfo: m" {
		t.Errorf("call: %q, want getUserInfo called", got)
	}
	if got := text(t, cl.callTool(2, "my_server__foo_bar", `{}`)); !strings.Contains(got, `"fooBar"`) || !strings.Contains(got, `"foo-bar"`) {
		t.Errorf("call of a colliding snake_case name: %q, want both names", got)
	}
}

// TestFilters: the member's filter and the endpoint's apply to lists and
// calls; a filtered tool or resource is unknown, as if it did not exist.
func TestFilters(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	a.Filter = Filter{Tools: Globs{Deny: []string{"crash"}}, Resources: Globs{Deny: []string{"mem://b"}}}
	e := newEndpoint(t, Options{Filter: Filter{Tools: Globs{Allow: []string{"echo", "crash", "p*"}}}}, a)
	cl := connect(t, e, `{}`)
	if names := cl.tools(); !slices.Equal(names, []string{"a__echo", "a__pid"}) {
		t.Errorf("tools %v, want a__echo and a__pid", names)
	}
	unknown := text(t, cl.callTool(1, "a__nonexistent", `{}`))
	for _, name := range []string{"a__crash", "a__slow"} {
		got := text(t, cl.callTool(2, name, `{}`))
		if strings.Replace(got, name, "a__nonexistent", 1) != unknown {
			t.Errorf("call of filtered %s: %q, want what an unknown tool gets: %q", name, got, unknown)
		}
	}
	if uris, _ := cl.listAll("resources/list", "resources", "uri"); !slices.Equal(uris, []string{"mem://a"}) {
		t.Errorf("resources %v, want mem://a only", uris)
	}
	if got := text(t, cl.do(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"mem://b"}}`)); !strings.Contains(got, "-32002") {
		t.Errorf("read of a filtered resource: %q, want not found", got)
	}
	if got := text(t, cl.do(`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"mem://a"}}`)); !strings.Contains(got, `"content of mem://a"`) && !strings.Contains(got, "content of mem://a") {
		t.Errorf("read of mem://a: %q", got)
	}
}

// TestResourcesPromptsCompletion: resources routed by URI (listed, or by a
// template), an ambiguous or unknown URI told precisely, prompts and
// completions routed by name and ref.
func TestResourcesPromptsCompletion(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: testkit.CatalogOptions{
		Resources: []string{"file:///b1", "mem://a"}, ResourceTemplates: []string{"note://{id}"}, Prompts: []string{"greet"},
	}})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{}`)

	read := func(uri string) string {
		return string(cl.do(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":%q}}`, uri)))
	}
	if r := read("mem://b"); !strings.Contains(r, "content of mem://b") {
		t.Errorf("mem://b: %s", r)
	}
	if r := read("note://7"); !strings.Contains(r, "content of note://7") {
		t.Errorf("note://7 (b's template): %s", r)
	}
	if r := read("note://7/x"); !strings.Contains(r, "-32002") {
		t.Errorf("note://7/x matches no level-1 template: %s", r)
	}
	if r := read("mem://a"); !strings.Contains(r, "ambiguous") || !strings.Contains(r, `\"a\"`) || !strings.Contains(r, `\"b\"`) {
		t.Errorf("mem://a, listed by both: %s, want an error naming both", r)
	}
	if r := read("zzz://1"); !strings.Contains(r, "-32002") || !strings.Contains(r, `zzz://1`) {
		t.Errorf("zzz://1: %s, want not found naming the URI", r)
	}
	r := cl.result(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"note://7"}}`)
	if string(r) != "{}" {
		t.Errorf("subscribe: %s", r)
	}
	if tmpls, _ := cl.listAll("resources/templates/list", "resourceTemplates", "uriTemplate"); !slices.Equal(tmpls, []string{"note://{id}"}) {
		t.Errorf("templates %v", tmpls)
	}

	if prompts, _ := cl.listAll("prompts/list", "prompts", "name"); !slices.Equal(prompts, []string{"b__greet"}) {
		t.Errorf("prompts %v, want b__greet", prompts)
	}
	if got := text(t, cl.do(`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"b__greet"}}`)); got != "greet" {
		t.Errorf("prompts/get: %q, want the member's own name", got)
	}
	for _, tc := range []struct{ ref, want string }{
		{`{"type":"ref/prompt","name":"b__greet"}`, `"values":["greet"]`},
		{`{"type":"ref/resource","uri":"note://{id}"}`, `"values":["note://{id}"]`},
	} {
		r := cl.do(`{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":` + tc.ref + `,"argument":{"name":"x","value":""}}}`)
		if !strings.Contains(string(r), tc.want) {
			t.Errorf("complete %s: %s, want %s", tc.ref, r, tc.want)
		}
	}
	var caps struct {
		Capabilities map[string]json.RawMessage
	}
	_ = json.Unmarshal(cl.init, &caps)
	if caps.Capabilities["completions"] == nil || !strings.Contains(string(caps.Capabilities["resources"]), `"subscribe":true`) {
		t.Errorf("capabilities %s: want completions (b has them) and resources with subscribe", cl.init)
	}
}
