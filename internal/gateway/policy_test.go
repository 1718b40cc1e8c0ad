package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// policyConfig is two fake servers behind API keys alice, bob and admin
// (scope "admin"), with policies:
//   - server a: alice may use the read_* tools and prompt "greet", not
//     read_secret; bob the tools whose call has arguments.message "ok"
//     (CEL over the arguments) and no resources; admin everything;
//   - server b: no policy;
//   - endpoint "all" (a and b): denies b's tool "b__write_x" to everyone
//     but admin (by the exposed name).
func policyConfig(t *testing.T) *config.Config {
	t.Helper()
	opts := testkit.FakeOptions{Catalog: testkit.CatalogOptions{
		ExtraTools: []string{"read_a", "read_b", "read_secret", "write_x"},
		Prompts:    []string{"greet", "other"},
		Resources:  []string{"file:///pub/1", "file:///priv/2"},
	}}
	cfg := newConfig(fakeServer("a", opts), fakeServer("b", opts))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a", "b"})
	cfg.Gateway.Auth = config.NewAuth()
	for _, k := range []struct {
		name   string
		scopes []string
	}{{"alice", nil}, {"bob", nil}, {"admin", []string{"admin"}}} {
		sum := sha256.Sum256([]byte("key-of-" + k.name))
		cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Name: k.name, SHA256: hex.EncodeToString(sum[:]), Scopes: k.scopes})
	}
	cfg.Servers["a"].Policy = &config.Policy{Default: config.PolicyDeny, Rules: []config.PolicyRule{
		{Effect: config.PolicyAllow, When: `"admin" in principal.scopes`},
		{Effect: config.PolicyDeny, Tools: []string{"read_secret"}},
		{Effect: config.PolicyAllow, Principals: []string{"alice"}, Tools: []string{"read_*"}, Prompts: []string{"greet"}, Resources: []string{"file:///pub/*"}},
		{Effect: config.PolicyAllow, Principals: []string{"bob"}, Tools: []string{"*"}, When: `!has(arguments.message) || arguments.message == "ok"`},
	}}
	cfg.Endpoints["all"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Tools: []string{"b__write_x"}, When: `!("admin" in principal.scopes)`},
	}}
	return cfg
}

// names returns the sorted names (or URIs) a list reply carries.
func names(t *testing.T, m rpc, array, key string) []string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("list: %s", m.Error.Message)
	}
	var res map[string]json.RawMessage
	var items []map[string]any
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res[array], &items); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it[key].(string))
	}
	sort.Strings(out)
	return out
}

// keyed returns a session of c's kind authenticated as principal.
func keyed(c *mcpClient, principal string) *mcpClient {
	c.header.Set("Authorization", "Bearer key-of-"+principal)
	return c
}

// Lists are filtered per principal and a denied call is answered with a
// JSON-RPC error carrying its id, at the server's URL and through the
// endpoint (by the member's policy and the endpoint's own), and the
// server never sees the denied call.
func TestPolicyFiltersListsAndRefusesCalls(t *testing.T) {
	g := startGateway(t, policyConfig(t))
	alice, bob, admin := keyed(g.client("a"), "alice"), keyed(g.client("a"), "bob"), keyed(g.client("a"), "admin")
	for _, c := range []*mcpClient{alice, bob, admin} {
		c.connect(t)
	}

	// tools lists c's tools, every page.
	tools := func(c *mcpClient) []string {
		var all []string
		cursor := ""
		for range 10 {
			params := `{}`
			if cursor != "" {
				params = `{"cursor":` + cursor + `}`
			}
			m := c.post(t, `{"jsonrpc":"2.0","id":"l","method":"tools/list","params":`+params+`}`).final(t)
			all = append(all, names(t, m, "tools", "name")...)
			var res struct {
				NextCursor json.RawMessage `json:"nextCursor"`
			}
			if json.Unmarshal(m.Result, &res); res.NextCursor == nil {
				break
			}
			cursor = string(res.NextCursor)
		}
		sort.Strings(all)
		return all
	}
	if got, want := tools(alice), []string{"read_a", "read_b"}; !slices.Equal(got, want) {
		t.Errorf("alice's tools %v, want %v", got, want)
	}
	if got := tools(bob); slices.Contains(got, "read_secret") || !slices.Contains(got, "echo") || !slices.Contains(got, "write_x") {
		t.Errorf("bob's tools %v: want all but read_secret", got)
	}
	if got := tools(admin); !slices.Contains(got, "read_secret") || len(got) < 10 {
		t.Errorf("admin's tools %v: want all", got)
	}
	if got, want := names(t, alice.post(t, `{"jsonrpc":"2.0","id":2,"method":"prompts/list"}`).final(t), "prompts", "name"), []string{"greet"}; !slices.Equal(got, want) {
		t.Errorf("alice's prompts %v, want %v", got, want)
	}
	if got, want := names(t, alice.post(t, `{"jsonrpc":"2.0","id":3,"method":"resources/list"}`).final(t), "resources", "uri"), []string{"file:///pub/1"}; !slices.Equal(got, want) {
		t.Errorf("alice's resources %v, want %v", got, want)
	}
	if got := names(t, bob.post(t, `{"jsonrpc":"2.0","id":3,"method":"resources/list"}`).final(t), "resources", "uri"); len(got) != 0 {
		t.Errorf("bob's resources %v, want none", got)
	}

	// denied checks that a request is refused: at a server's URL saying
	// so; through an endpoint, an item a member's policy hides is unknown
	// there, as one nobody has.
	denied := func(c *mcpClient, id, body string) {
		t.Helper()
		r := c.post(t, body)
		m := r.final(t)
		if r.Status != http.StatusOK || string(m.ID) != id || m.Error == nil || m.Error.Code != -32602 ||
			!strings.Contains(m.Error.Message, "not allowed") && !(strings.Contains(c.url, "/endpoints/") && strings.Contains(m.Error.Message, "unknown")) {
			t.Errorf("%s: status %d, reply %+v: want a -32602 \"not allowed\" error with id %s", body, r.Status, m, id)
		}
	}
	denied(alice, `"x-1"`, callBody(`"x-1"`, "read_secret", map[string]string{"message": "m"}, ""))
	denied(alice, `7`, callBody(`7`, "echo", map[string]string{"message": "m"}, ""))
	denied(alice, `8`, `{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":"other"}}`)
	denied(alice, `9`, `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"file:///priv/2"}}`)
	denied(bob, `10`, callBody(`10`, "read_a", map[string]string{"message": "not ok"}, ""))
	if got := toolText(t, alice.post(t, callBody("11", "read_a", map[string]string{"message": "hi"}, "")).final(t)); got != "read_a: hi" {
		t.Errorf("alice's allowed call: %q", got)
	}
	if got := toolText(t, bob.post(t, callBody("12", "read_a", map[string]string{"message": "ok"}, "")).final(t)); got != "read_a: ok" {
		t.Errorf("bob's allowed call: %q", got)
	}
	// The server saw none of the denied calls: only its own "calls" call
	// is in flight, and nothing was cancelled.
	if got := toolText(t, admin.post(t, callBody("13", "calls", nil, "")).final(t)); strings.Contains(got, "read_secret") || strings.Contains(got, "not ok") {
		t.Errorf("a denied call reached the server: %s", got)
	}

	// Through the endpoint: a's policy applies to its members' own names,
	// the endpoint's to the exposed ones.
	ea, eb, eadmin := keyed(g.endpointClient("all"), "alice"), keyed(g.endpointClient("all"), "bob"), keyed(g.endpointClient("all"), "admin")
	for _, c := range []*mcpClient{ea, eb, eadmin} {
		c.connect(t)
	}
	got := tools(ea)
	if slices.Contains(got, "a__read_secret") || slices.Contains(got, "a__echo") || !slices.Contains(got, "a__read_a") || slices.Contains(got, "b__write_x") || !slices.Contains(got, "b__read_secret") {
		t.Errorf("alice's tools at the endpoint: %v", got)
	}
	if got := tools(eadmin); !slices.Contains(got, "a__read_secret") || !slices.Contains(got, "b__write_x") {
		t.Errorf("admin's tools at the endpoint: %v", got)
	}
	denied(ea, `20`, callBody(`20`, "a__read_secret", map[string]string{"message": "m"}, ""))
	denied(ea, `21`, callBody(`21`, "b__write_x", map[string]string{"message": "m"}, ""))
	denied(eb, `22`, callBody(`22`, "a__read_b", map[string]string{"message": "no"}, ""))
	if got := toolText(t, eb.post(t, callBody("23", "a__read_b", map[string]string{"message": "ok"}, "")).final(t)); got != "read_b: ok" {
		t.Errorf("bob's allowed call through the endpoint: %q", got)
	}
	if got := toolText(t, eadmin.post(t, callBody("24", "b__write_x", map[string]string{"message": "w"}, "")).final(t)); got != "write_x: w" {
		t.Errorf("admin's call of b__write_x: %q", got)
	}
}

// A policy expression that does not compile is a config problem naming
// its key, found before anything starts.
func TestPolicyBadExpression(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Servers["a"].Policy = &config.Policy{Default: config.PolicyDeny, Rules: []config.PolicyRule{
		{Effect: config.PolicyAllow, When: `principal.name ==`},
		{Effect: config.PolicyAllow, When: `1 + 2`},
	}}
	err := CheckPolicies(cfg)
	var ps config.Problems
	if !errors.As(err, &ps) || len(ps) != 2 || ps[0].Path != "mcpServers.a.policy.rules[0].when" || ps[1].Path != "mcpServers.a.policy.rules[1].when" {
		t.Fatalf("CheckPolicies: %v", err)
	}
	if _, err := Start(cfg, testLogger(t)); err == nil || !strings.Contains(err.Error(), "rules[0].when") {
		t.Fatalf("Start: %v, want the problem", err)
	}
}

// modernPost POSTs one request of the stateless revision to path and
// returns its reply.
func modernPost(t *testing.T, g *testGateway, path, method, name, params string) rpc {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"m","method":"` + method + `","params":` + params + `}`
	req, _ := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
		raw = bytes.TrimPrefix(lines[len(lines)-1], []byte("data: "))
	}
	return decode(t, raw)
}

// The policy holds in every era: a legacy SSE session, a stateless
// request (whose filtered list is never shared: cacheScope "private"),
// and through the default endpoint; here without authentication, for the
// anonymous principal.
func TestPolicyAllEras(t *testing.T) {
	opts := testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"read_a", "read_secret"}}}
	cfg := newConfig(fakeServer("a", opts))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	cfg.Servers["a"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Tools: []string{"read_secret"}},
	}}
	g := startGateway(t, cfg)
	hidden := func(what string, m rpc) {
		t.Helper()
		got := names(t, m, "tools", "name")
		if slices.Contains(got, "read_secret") || slices.Contains(got, "a__read_secret") || !slices.Contains(got, "read_a") && !slices.Contains(got, "a__read_a") {
			t.Errorf("%s: tools %v", what, got)
		}
	}
	refused := func(what string, m rpc) {
		t.Helper()
		if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "read_secret") {
			t.Errorf("%s: the denied call got %+v", what, m)
		}
	}

	l := openLegacy(t, g, "/servers/a/sse", nil)
	l.initialize()
	hidden("legacy", l.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	refused("legacy", l.call(callBody("2", "read_secret", map[string]string{"message": "m"}, "")))

	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	m := modernPost(t, g, "/servers/a/mcp", "tools/list", "", `{`+meta+`}`)
	hidden("stateless", m)
	if !strings.Contains(string(m.Result), `"cacheScope":"private"`) {
		t.Errorf("stateless list under a policy: %s, want cacheScope private", m.Result)
	}
	refused("stateless", modernPost(t, g, "/servers/a/mcp", "tools/call", "read_secret", `{"name":"read_secret","arguments":{},`+meta+`}`))
	refused("stateless endpoint", modernPost(t, g, "/mcp", "tools/call", "a__read_secret", `{"name":"a__read_secret","arguments":{},`+meta+`}`))

	c := g.endpointClient("")
	c.connect(t)
	hidden("endpoint", c.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).final(t))
}

// A reload whose policy names a field principal does not have (or
// compares values of different types) is refused with the problem at its
// key, and the running policy stays: before type-checking, it compiled,
// was swapped in and denied everyone silently.
func TestPolicyTypeErrorRefusedAtReload(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Servers["a"].Policy = &config.Policy{Default: config.PolicyDeny, Rules: []config.PolicyRule{
		{Effect: config.PolicyAllow, When: `principal.kind == "anonymous"`},
	}}
	g, logs := startReloading(t, cfg, ReloadOptions{})

	next := cloneConfig(cfg)
	next.Servers["a"].Policy = &config.Policy{Default: config.PolicyDeny, Rules: []config.PolicyRule{
		{Effect: config.PolicyAllow, When: `principal.kind == "anonymous"`},
		{Effect: config.PolicyAllow, When: `principal.nme == 1`},
	}}
	err := g.gw.Reload(next)
	if err == nil || !strings.Contains(err.Error(), "mcpServers.a.policy.rules[1].when: 1:10: undefined field 'nme'") {
		t.Fatalf("reload: %v, want the undefined field at its key", err)
	}
	if errs := logs.lines("level=ERROR", "config reload refused"); len(errs) != 1 || !strings.Contains(errs[0], "rules[1].when") {
		t.Errorf("error lines %q, want the one problem", errs)
	}
	c := g.client("a")
	c.connect(t)
	echoOK(t, c, "under the old policy")
}
