package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// faultsRemoteConfig is one remote echo server "r" (its own parser is
// case-sensitive, as the TypeScript and Python SDKs' are) behind API key
// alice, under policy pol, with endpoint "all" serving it.
func faultsRemoteConfig(t *testing.T, pol *config.Policy) *config.Config {
	t.Helper()
	echo := echoserver.NewHandler()
	up := httptest.NewServer(echo)
	t.Cleanup(func() {
		echo.Close()
		up.CloseClientConnections()
		up.Close()
	})
	gw := config.Defaults()
	s := gw.NewServer("r")
	s.Type, s.URL = config.TypeHTTP, up.URL+"/mcp"
	s.Policy = pol
	cfg := newConfig(s)
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"r"})
	cfg.Gateway.Auth = config.NewAuth()
	for _, name := range []string{"alice", "bob"} {
		sum := sha256.Sum256([]byte("key-of-" + name))
		cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Name: name, SHA256: hex.EncodeToString(sum[:])})
	}
	return cfg
}

// The policy reads params with encoding/json, which matches member names
// case-insensitively and takes the last match; the server reads the exact
// "name". A params object with both "name" (a denied tool) and "Name" (an
// allowed one) passes jsonrpc.Parse (no duplicate) and the policy checks
// the allowed name while the server runs the denied tool.
func TestPolicyFaultsCaseFoldedNameBypass(t *testing.T) {
	g := startGateway(t, faultsRemoteConfig(t, &config.Policy{Default: config.PolicyDeny, Rules: []config.PolicyRule{
		{Effect: config.PolicyAllow, Principals: []string{"alice"}, Tools: []string{"other"}},
	}}))
	alice := keyed(g.client("r"), "alice")
	alice.connect(t)
	// Sanity: the plain call of echo is denied.
	if m := alice.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"plain"}}}`).final(t); m.Error == nil || !strings.Contains(m.Error.Message, "not allowed") {
		t.Fatalf("plain denied call: %+v", m)
	}
	m := alice.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","Name":"other","arguments":{"message":"pwned"}}}`).final(t)
	if m.Error == nil {
		t.Errorf("denied tool echo ran through a case-folded \"Name\": result %s", m.Result)
	}
}

// The same with the arguments a CEL rule checks: "Arguments" (checked)
// shadows "arguments" (run) for encoding/json, at the server's URL and
// through an endpoint (aggregate.permitCall decodes them the same way).
func TestPolicyFaultsCaseFoldedArgumentsBypass(t *testing.T) {
	g := startGateway(t, faultsRemoteConfig(t, &config.Policy{Default: config.PolicyDeny, Rules: []config.PolicyRule{
		{Effect: config.PolicyAllow, Principals: []string{"alice"}, Tools: []string{"echo"}, When: `!has(arguments.message) || arguments.message == "ok"`},
	}}))
	for _, c := range []*mcpClient{keyed(g.client("r"), "alice"), keyed(g.endpointClient("all"), "alice")} {
		c.connect(t)
		tool := "echo"
		if strings.Contains(c.url, "/endpoints/") {
			tool = "r__echo"
		}
		if m := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"message":"ok"}}}`).final(t); m.Error != nil {
			t.Fatalf("%s: plain allowed call: %+v", c.url, m.Error)
		}
		if m := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"message":"plain"}}}`).final(t); m.Error == nil {
			t.Fatalf("%s: plain denied call: %+v", c.url, m)
		}
		m := c.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"message":"pwned"},"Arguments":{"message":"ok"}}}`).final(t)
		if m.Error == nil {
			t.Errorf("%s: denied arguments ran through a case-folded \"Arguments\": result %s", c.url, m.Result)
		}
	}
}

// faultsModernPost POSTs one stateless (2026-07-28) request to path as
// principal who ("": anonymous) and returns its reply.
func faultsModernPost(t *testing.T, g *testGateway, path, who, method, name, params string) rpc {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"m","method":"` + method + `","params":` + params + `}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer key-of-"+who)
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

// A member's policy filters an endpoint's merged list per principal, but
// the merged list keeps the member's cacheScope "public": a shared cache
// may then give alice's list to bob (and bob's, empty, to alice). At the
// server's own URL the same list is "private" (guardedConn); through an
// endpoint without a policy of its own nothing makes it so.
func TestPolicyFaultsEndpointListKeepsPublicCacheScope(t *testing.T) {
	g := startGateway(t, faultsRemoteConfig(t, &config.Policy{Default: config.PolicyDeny, Rules: []config.PolicyRule{
		{Effect: config.PolicyAllow, Principals: []string{"alice"}, Tools: []string{"echo"}},
	}}))
	meta := `{` + gwAtkMeta + `}}`
	direct := faultsModernPost(t, g, "/servers/r/mcp", "alice", "tools/list", "", meta)
	if direct.Error != nil || !strings.Contains(string(direct.Result), `"cacheScope":"private"`) {
		t.Fatalf("server URL list: %+v %s", direct.Error, direct.Result)
	}
	a := faultsModernPost(t, g, "/endpoints/all/mcp", "alice", "tools/list", "", meta)
	b := faultsModernPost(t, g, "/endpoints/all/mcp", "bob", "tools/list", "", meta)
	if a.Error != nil || b.Error != nil {
		t.Fatalf("endpoint lists: %+v %+v", a.Error, b.Error)
	}
	t.Logf("alice: %s\nbob: %s", a.Result, b.Result)
	if !strings.Contains(string(a.Result), "r__echo") || strings.Contains(string(b.Result), "r__echo") {
		t.Fatalf("the lists are not filtered per principal: alice %s, bob %s", a.Result, b.Result)
	}
	for who, m := range map[string]rpc{"alice": a, "bob": b} {
		if strings.Contains(string(m.Result), `"cacheScope":"public"`) {
			t.Errorf("%s's endpoint list, filtered by the member's policy, is cacheScope public: %s", who, m.Result)
		}
	}
}

// faultsModernServerConfig is the Modern fake "m" (a server of the
// revision: passthrough) behind API keys alice and bob.
func faultsModernServerConfig(t *testing.T) *config.Config {
	t.Helper()
	srv := fakeServer("m", testkit.FakeOptions{Modern: true})
	srv.Protocol = config.ProtocolModern
	cfg := newConfig(srv)
	cfg.Gateway.Auth = config.NewAuth()
	for _, name := range []string{"alice", "bob"} {
		sum := sha256.Sum256([]byte("key-of-" + name))
		cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Name: name, SHA256: hex.EncodeToString(sum[:])})
	}
	return cfg
}

// unsealRetry looks for the bytes "requestState" before it unseals; a
// client that writes the key with a JSON escape ("request\u0053tate")
// skips the check and hands the server a state of its own making, which
// the sealing (passstate.go) exists to prevent: the server's own,
// unsealed state is refused when written plainly, and must be whatever
// way it is written.
func TestPolicyFaultsPassStateEscapedKey(t *testing.T) {
	g := startGateway(t, faultsModernServerConfig(t))
	for _, key := range []string{`requestState`, `request\u0053tate`, `RequestState`} {
		params := `{"name":"mrtr_state","arguments":{"message":"x1"},"` + key + `":"srv:x1","inputResponses":{"q":{"action":"accept","content":{}}},` + gwAtkMeta + `}}`
		m := faultsModernPost(t, g, "/servers/m/mcp", "bob", "tools/call", "mrtr_state", params)
		if m.Error == nil {
			t.Errorf("a forged unsealed state under key %s reached the server: %s", key, m.Result)
		}
	}
}

// A subscriptions/listen to a server of the revision is passed through
// as it came: its resourceSubscriptions must be checked against the
// policy, or bob subscribes to a resource denied to him and gets its
// notifications/resources/updated.
// (To a server of the session eras the gateway subscribes on the
// listen's behalf through the guard, and a denied URI is dropped.)
func TestPolicyFaultsPassthroughListenSubscribesDeniedResource(t *testing.T) {
	cfg := faultsModernServerConfig(t)
	cfg.Servers["m"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Principals: []string{"bob"}, Resources: []string{"mem://b"}},
	}}
	g := startGateway(t, cfg)
	// Sanity: the plain subscribe is refused.
	if m := faultsModernPost(t, g, "/servers/m/mcp", "bob", "resources/subscribe", "", `{"uri":"mem://b",`+gwAtkMeta+`}}`); m.Error == nil {
		t.Fatalf("bob's resources/subscribe of mem://b: %s", m.Result)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["mem://b"]},` + gwAtkMeta + `}}}`
	req := modernRequest(ctx, g, "m", "subscriptions/listen", body)
	req.Header.Set("Authorization", "Bearer key-of-bob")
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusBadRequest {
		// Refused as a whole, naming the URI: as good as dropping it.
		if raw, _ := io.ReadAll(resp.Body); !strings.Contains(string(raw), `resource \"mem://b\" is not allowed`) {
			t.Fatalf("listen refused with %s", raw)
		}
		return
	}
	sc := bufio.NewScanner(resp.Body)
	next := func() string {
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return line
			}
		}
		return ""
	}
	ack := next()
	if !strings.Contains(ack, "acknowledged") {
		t.Fatalf("listen: status %d, first message %q", resp.StatusCode, ack)
	}
	if !strings.Contains(ack, "mem://b") {
		return // the denied URI was dropped
	}
	t.Errorf("bob's listen was acknowledged with the denied resource: %s", ack)
	if m := faultsModernPost(t, g, "/servers/m/mcp", "alice", "tools/call", "touch", `{"name":"touch","arguments":{"uri":"mem://b"},`+gwAtkMeta+`}}`); m.Error != nil {
		t.Fatalf("touch: %+v", m.Error)
	}
	if got := next(); strings.Contains(got, "resources/updated") && strings.Contains(got, "mem://b") {
		t.Errorf("bob got the update of a resource denied to him: %s", got)
	}
}

// Many principals list and call at once, in sessions and statelessly, at
// a shared server and through an endpoint: each gets its own filtered
// list every time, and denied calls are refused (run with -race).
func TestPolicyFaultsConcurrentPrincipals(t *testing.T) {
	g := startGateway(t, policyConfig(t))
	want := map[string]func([]string) bool{
		"alice": func(got []string) bool { return slices.Equal(got, []string{"read_a", "read_b"}) },
		"bob": func(got []string) bool {
			return !slices.Contains(got, "read_secret") && slices.Contains(got, "write_x")
		},
		"admin": func(got []string) bool { return slices.Contains(got, "read_secret") },
	}
	meta := `{` + gwAtkMeta + `}}`
	var wg sync.WaitGroup
	for _, who := range []string{"alice", "bob", "admin", "alice", "bob", "admin"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := keyed(g.client("a"), who)
			c.connect(t)
			e := keyed(g.endpointClient("all"), who)
			e.connect(t)
			for i := range 8 {
				// All of a's tools, over every page.
				var got []string
				cursor := ""
				for range 10 {
					params := `{}`
					if cursor != "" {
						params = `{"cursor":` + cursor + `}`
					}
					var m rpc
					if i%2 == 0 {
						m = c.post(t, `{"jsonrpc":"2.0","id":"l","method":"tools/list","params":`+params+`}`).final(t)
					} else {
						if cursor != "" {
							params = `{"cursor":` + cursor + `,` + gwAtkMeta + `}}`
						} else {
							params = meta
						}
						m = faultsModernPost(t, g, "/servers/a/mcp", who, "tools/list", "", params)
					}
					got = append(got, names(t, m, "tools", "name")...)
					var res struct {
						NextCursor json.RawMessage `json:"nextCursor"`
					}
					if json.Unmarshal(m.Result, &res); res.NextCursor == nil {
						break
					}
					cursor = string(res.NextCursor)
				}
				sort.Strings(got)
				if !want[who](got) {
					t.Errorf("%s's tools (round %d): %v", who, i, got)
				}
				en := names(t, e.post(t, `{"jsonrpc":"2.0","id":"e","method":"tools/list"}`).final(t), "tools", "name")
				if who != "admin" && slices.Contains(en, "a__read_secret") || who == "alice" && slices.Contains(en, "a__echo") {
					t.Errorf("%s's endpoint tools (round %d): %v", who, i, en)
				}
				if who == "alice" {
					if m := c.post(t, callBody(`"d"`, "read_secret", map[string]string{"message": "m"}, "")).final(t); m.Error == nil {
						t.Errorf("alice called read_secret: %s", m.Result)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// A filtered list the client gives up on (its POST's connection closes,
// in a session and statelessly) is abandoned upstream: the server's
// pending request ends, and nothing is left behind (the package's goleak
// check). A list answered after that is filtered and dropped.
func TestPolicyFaultsAbandonedFilteredList(t *testing.T) {
	opts := testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"read_a", "read_secret"}, ListDelay: 10 * time.Minute}}
	cfg := newConfig(fakeServer("a", opts))
	cfg.Servers["a"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Tools: []string{"read_secret"}},
	}}
	g := startGateway(t, cfg)
	c := g.client("a")
	// A 2025-06-18 session: its POST streams cannot be resumed, so a
	// client leaving abandons the request at once. (A 2025-11-25 reply
	// slower than replyWait becomes a resumable stream, kept for the
	// client to come back: whether it did depended on the machine's speed.)
	c.version = "2025-06-18"
	c.connect(t)
	for _, stateless := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		var req *http.Request
		if stateless {
			req = modernRequest(ctx, g, "a", "tools/list", `{"jsonrpc":"2.0","id":"l","method":"tools/list","params":{`+gwAtkMeta+`}}}`)
		} else {
			req = c.request(http.MethodPost, `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`).WithContext(ctx)
		}
		done := make(chan error, 1)
		go func() {
			resp, err := g.http.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			done <- err
		}()
		testkit.WaitFor(t, "the list to be in flight", func() bool { return g.pending("a") == 1 })
		cancel()
		<-done
		testkit.WaitFor(t, "the abandoned list to end upstream", func() bool { return g.pending("a") == 0 })
	}
	// The session still works, and its lists are still filtered.
	if m := c.post(t, callBody("1", "read_secret", map[string]string{"message": "m"}, "")).final(t); m.Error == nil {
		t.Errorf("read_secret after the abandoned lists: %s", m.Result)
	}
}

// A 2025-03-26 batch mixing denied and allowed requests, with the method
// and the name written with JSON escapes, at the server and through the
// endpoint: each denied one is refused under its own id, the others are
// served, and the list in it is filtered.
func TestPolicyFaultsBatchAndEscapes(t *testing.T) {
	g := startGateway(t, policyConfig(t))
	for _, c := range []*mcpClient{keyed(g.client("a"), "alice"), keyed(g.endpointClient("all"), "alice")} {
		c.version = "2025-03-26"
		c.connect(t)
		p := ""
		if strings.Contains(c.url, "/endpoints/") {
			p = "a__"
		}
		r := c.post(t, `[`+
			`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"`+p+`read_\u0073ecret","arguments":{"message":"m"}}},`+
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+p+`read_a","arguments":{"message":"hi"}}},`+
			`{"jsonrpc":"2.0","id":3,"method":"tools/\u006cist"},`+
			`{"jsonrpc":"2.0","id":4,"method":"\u0074ools/call","params":{"name":"`+p+`echo","arguments":{"message":"m"}}},`+
			`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"file:\/\/\/priv\/2"}},`+
			`{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"`+p+`\u006fther"}}`+
			`]`)
		if len(r.Msgs) != 6 {
			t.Fatalf("%s: status %d, %d replies: %s", c.url, r.Status, len(r.Msgs), r.Body)
		}
		for _, raw := range r.Msgs {
			m := decode(t, raw)
			switch string(m.ID) {
			case "1", "4", "5", "6":
				if m.ID[0] == '5' && p != "" {
					break // b, in the endpoint too, has file:///priv/2 and no policy
				}
				if m.Error == nil {
					t.Errorf("%s: denied request %s served: %s", c.url, m.ID, m.Result)
				}
			case "2":
				if m.Error != nil {
					t.Errorf("%s: allowed call: %+v", c.url, m.Error)
				}
			case "3":
				got := names(t, m, "tools", "name")
				if slices.Contains(got, p+"read_secret") || slices.Contains(got, p+"echo") || !slices.Contains(got, p+"read_a") {
					t.Errorf("%s: batched list %v", c.url, got)
				}
			}
		}
	}
}

// The same through an endpoint's own policy (the guard on the endpoint
// reads "Name", the endpoint routes on "name").
func TestPolicyFaultsCaseFoldedNameBypassEndpointPolicy(t *testing.T) {
	cfg := faultsRemoteConfig(t, nil)
	cfg.Endpoints["all"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Tools: []string{"r__echo"}},
	}}
	g := startGateway(t, cfg)
	alice := keyed(g.endpointClient("all"), "alice")
	alice.connect(t)
	if m := alice.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"r__echo","arguments":{"message":"plain"}}}`).final(t); m.Error == nil {
		t.Fatalf("plain denied call: %+v", m)
	}
	m := alice.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"r__echo","Name":"r__other","arguments":{"message":"pwned"}}}`).final(t)
	if m.Error == nil {
		t.Errorf("endpoint-denied tool r__echo ran through a case-folded \"Name\": result %s", m.Result)
	}
}

// Through an endpoint, a resource a member's policy denies is refused
// for every method that names it (read, subscribe, unsubscribe, a
// completion of its template), in a session and statelessly, and is not
// in the lists.
func TestPolicyFaultsEndpointResourceMethods(t *testing.T) {
	opts := testkit.FakeOptions{Catalog: testkit.CatalogOptions{
		Resources:         []string{"file:///pub/1", "file:///priv/2"},
		ResourceTemplates: []string{"file:///priv/{name}", "file:///pub/{name}"},
	}}
	cfg := newConfig(fakeServer("a", opts))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	cfg.Gateway.Auth = config.NewAuth()
	sum := sha256.Sum256([]byte("key-of-alice"))
	cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Name: "alice", SHA256: hex.EncodeToString(sum[:])})
	cfg.Servers["a"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Resources: []string{"file:///priv/*"}},
	}}
	g := startGateway(t, cfg)
	for _, c := range []*mcpClient{keyed(g.client("a"), "alice"), keyed(g.endpointClient("all"), "alice")} {
		c.connect(t)
		for i, body := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///priv/2"}}`,
			`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///priv/2"}}`,
			`{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"file:///priv/2"}}`,
			`{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///priv/{name}"},"argument":{"name":"name","value":""}}}`,
			`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"file:///priv/other"}}`,
		} {
			if m := c.post(t, body).final(t); m.Error == nil {
				t.Errorf("%s: request %d served: %s", c.url, i+1, m.Result)
			}
		}
		for _, l := range []struct{ method, array, key string }{{"resources/list", "resources", "uri"}, {"resources/templates/list", "resourceTemplates", "uriTemplate"}} {
			got := names(t, c.post(t, `{"jsonrpc":"2.0","id":9,"method":"`+l.method+`"}`).final(t), l.array, l.key)
			for _, n := range got {
				if strings.HasPrefix(n, "file:///priv/") {
					t.Errorf("%s: %s lists %s", c.url, l.method, n)
				}
			}
		}
		if m := c.post(t, `{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"file:///pub/1"}}`).final(t); m.Error != nil {
			t.Errorf("%s: allowed read: %+v", c.url, m.Error)
		}
	}
}

// A sealed passthrough state is good only at the target and for the
// principal it was given for: alice's state from server m is refused at
// server n (the same program), at an endpoint, and for an anonymous
// client of an auth:false server.
func TestPolicyFaultsPassStateAcrossTargets(t *testing.T) {
	cfg := faultsModernServerConfig(t)
	n := fakeServer("n", testkit.FakeOptions{Modern: true})
	n.Protocol = config.ProtocolModern
	cfg.Servers["n"] = n
	o := fakeServer("o", testkit.FakeOptions{Modern: true})
	o.Protocol = config.ProtocolModern
	o.Auth = &config.TargetAuth{Off: true}
	cfg.Servers["o"] = o
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"m", "n"})
	g := startGateway(t, cfg)
	first := func(path, who, tool string) string {
		t.Helper()
		m := faultsModernPost(t, g, path, who, "tools/call", tool, `{"name":"`+tool+`","arguments":{"message":"x1"},`+gwAtkMeta+`}}`)
		var res struct {
			ResultType   string          `json:"resultType"`
			RequestState json.RawMessage `json:"requestState"`
		}
		if json.Unmarshal(m.Result, &res); res.ResultType != "input_required" {
			t.Fatalf("%s: %+v %s", path, m.Error, m.Result)
		}
		return string(res.RequestState)
	}
	retry := func(path, who, tool, state string) rpc {
		t.Helper()
		return faultsModernPost(t, g, path, who, "tools/call", tool, `{"name":"`+tool+`","arguments":{"message":"x1"},"requestState":`+state+`,"inputResponses":{"q":{"action":"accept","content":{}}},`+gwAtkMeta+`}}`)
	}
	state := first("/servers/m/mcp", "alice", "mrtr_state")
	for _, c := range []struct{ path, who, tool string }{
		{"/servers/n/mcp", "alice", "mrtr_state"},
		{"/servers/o/mcp", "", "mrtr_state"},
		{"/endpoints/all/mcp", "alice", "m__mrtr_state"},
	} {
		if m := retry(c.path, c.who, c.tool, state); m.Error == nil {
			t.Errorf("m's state for alice opened at %s for %q: %s", c.path, c.who, m.Result)
		}
	}
	if m := retry("/servers/m/mcp", "alice", "mrtr_state", state); m.Error != nil || toolText(t, m) != "state srv:x1" {
		t.Errorf("alice's own retry: %+v %s", m.Error, m.Result)
	}
	// o is auth:false: its states are the anonymous principal's, sealed
	// all the same; an anonymous retry of one opens.
	ostate := first("/servers/o/mcp", "", "mrtr_state")
	if strings.Contains(ostate, "srv:") {
		t.Errorf("o's state reached the client unsealed: %s", ostate)
	}
	if m := retry("/servers/m/mcp", "alice", "mrtr_state", ostate); m.Error == nil {
		t.Errorf("o's anonymous state opened at m for alice: %s", m.Result)
	}
}

// Recommendation: notifications are not filtered by the policy. A
// subscription to a URI the policy allows ("mem://priv", which the deny
// glob "mem://priv/*" does not match) gets the updates of its
// sub-resources, which the policy denies (a server of the revision, and
// the gateway's own listens, deliver an update to the listens of any URI
// it is under). The update then names a denied URI to bob.
func TestPolicyFaultsSubResourceUpdateOfDeniedURI(t *testing.T) {
	srv := fakeServer("m", testkit.FakeOptions{Modern: true})
	srv.Protocol = config.ProtocolModern
	cfg := newConfig(srv)
	cfg.Gateway.Auth = config.NewAuth()
	for _, name := range []string{"alice", "bob"} {
		sum := sha256.Sum256([]byte("key-of-" + name))
		cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Name: name, SHA256: hex.EncodeToString(sum[:])})
	}
	cfg.Servers["m"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Principals: []string{"bob"}, Resources: []string{"mem://priv/*"}},
	}}
	g := startGateway(t, cfg)
	bob := keyed(g.client("m"), "bob")
	bob.connect(t)
	if m := bob.post(t, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"mem://priv/secret"}}`).final(t); m.Error == nil {
		t.Fatal("bob subscribed to mem://priv/secret")
	}
	if m := bob.post(t, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"mem://priv"}}`).final(t); m.Error != nil {
		t.Skipf("subscribe mem://priv: %+v", m.Error)
	}
	events, closeGET := openGET(t, bob)
	defer closeGET()
	alice := keyed(g.client("m"), "alice")
	alice.connect(t)
	// Touch the denied sub-resource, then an allowed URI bob subscribed
	// to exactly: once that one arrives, everything before it has.
	for _, uri := range []string{"mem://priv/secret", "mem://priv"} {
		if m := alice.post(t, callBody(`"t"`, "touch", map[string]string{"uri": uri}, "")).final(t); m.Error != nil {
			t.Fatalf("touch %s: %+v", uri, m.Error)
		}
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the GET stream ended")
			}
			s := string(ev)
			if !strings.Contains(s, "resources/updated") {
				continue
			}
			if strings.Contains(s, "mem://priv/secret") {
				t.Errorf("bob got the update of a URI denied to him: %s", s)
				continue
			}
			if strings.Contains(s, `"mem://priv"`) {
				return
			}
		case <-timeout:
			t.Fatal("no update of mem://priv")
		}
	}
}
