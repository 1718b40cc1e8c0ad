package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The authentication tests (issue 11): the gateway as an OAuth 2.1 resource server and with API
// keys, judged by real peers. The authorization server is the official TypeScript SDK's demo
// (js/oauth_as.mjs: dynamic client registration, PKCE, opaque tokens, RFC 7662 introspection,
// strict resource checking); the client is the SDK's own OAuth client flow (js/oauth_client.mjs).
// JWTs are signed by the test against a JWKS it serves (auth_jwt_test.go).

const (
	oauthASScript      = "oauth_as.mjs"
	oauthClientScript  = "oauth_client.mjs"
	oauthExampleScript = "oauth_example_server.mjs"
	oauthClientTimeout = 2 * time.Minute
)

// sdkOAuthDemo is the SDK's demo authorization server module, and sdkExpress the express the
// SDK's examples (and js/oauth_as.mjs) run on: the npm peers the OAuth tests need.
func sdkOAuthDemo() string {
	return filepath.Join(peersDir, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", "examples", "server", "demoInMemoryOAuthProvider.js")
}

func sdkExpress() string {
	return filepath.Join(peersDir, "node_modules", "express", "package.json")
}

// authServer is a running js/oauth_as.mjs: the metadata it printed.
type authServer struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	RegistrationEndpoint  string `json:"registration_endpoint"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
	Resource              string `json:"resource"`
	Strict                bool   `json:"strict"`
}

// startAuthServer runs the SDK's demo authorization server on a loopback port until the test
// ends. With resource set it issues tokens for that resource only (the demo's strict mode).
func startAuthServer(t *testing.T, resource string) authServer {
	t.Helper()
	script := installScript(t, oauthASScript)
	args := []string{script}
	if resource != "" {
		args = append(args, "--resource", resource)
	}
	cmd := exec.Command(node22, args...)
	cmd.Dir = peersDir
	ready := make(chan authServer, 1)
	p := startProcess(t, "oauth-as", cmd, func(line string) {
		if !strings.HasPrefix(line, "{") {
			return
		}
		var as authServer
		if json.Unmarshal([]byte(line), &as) == nil && as.Issuer != "" {
			select {
			case ready <- as:
			default:
			}
		}
	})
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM, 10*time.Second, false) })
	select {
	case as := <-ready:
		u, err := url.Parse(as.Issuer)
		if err != nil || u.Hostname() != "127.0.0.1" || as.IntrospectionEndpoint == "" || as.Strict != (resource != "") {
			t.Fatalf("authorization server metadata: %+v (%v)", as, err)
		}
		return as
	case <-p.exited:
		t.Fatalf("the authorization server exited before listening: %v", p.waitErr)
	case <-time.After(30 * time.Second):
		t.Fatal("the authorization server printed no metadata within 30s")
	}
	panic("unreachable")
}

// Introspection client credentials the gateway is configured with. The demo's /introspect
// authenticates nobody, so any values do; a real authorization server checks them.
const (
	introspectionClientID     = "mcpgate-e2e"
	introspectionClientSecret = "e2e-secret"
)

// oauthAuth is the gateway's "auth" config trusting the demo authorization server as, whose
// opaque tokens are checked by introspection.
func oauthAuth(as authServer) map[string]any {
	return map[string]any{
		"oauth": map[string]any{
			"issuers": []any{map[string]any{
				"issuer": as.Issuer,
				"introspection": map[string]any{
					"url":          as.IntrospectionEndpoint,
					"clientId":     introspectionClientID,
					"clientSecret": introspectionClientSecret,
				},
			}},
		},
	}
}

// oauthSummary is what js/oauth_client.mjs prints.
type oauthSummary struct {
	OK   bool   `json:"ok"`
	URL  string `json:"url"`
	Flow []struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Status  int               `json:"status"`
		Bearer  bool              `json:"bearer"`
		Browser bool              `json:"browser"`
		RPC     string            `json:"rpc"`
		Params  map[string]string `json:"params"`
	} `json:"flow"`
	Challenge           string `json:"challenge"`
	ResourceMetadataURL string `json:"resourceMetadataUrl"`
	ResourceMetadata    struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	} `json:"resourceMetadata"`
	ClientID      string `json:"clientId"`
	Authorization struct {
		Params map[string]string `json:"params"`
		Status int               `json:"status"`
	} `json:"authorization"`
	TokenRequest map[string]string `json:"tokenRequest"`
	Token        string            `json:"token"`
	SessionID    string            `json:"sessionId"`
	Tools        []string          `json:"tools"`
	Call         struct {
		Tool    string `json:"tool"`
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"call"`
	Negative map[string]struct {
		Status          int    `json:"status"`
		WWWAuthenticate string `json:"wwwAuthenticate"`
	} `json:"negative"`
	Errors []string `json:"errors"`
}

// runOAuthClient runs js/oauth_client.mjs with args (after --url url) and returns its summary,
// failing the test unless it passed every check.
func runOAuthClient(t *testing.T, url string, args ...string) oauthSummary {
	t.Helper()
	script := installScript(t, oauthClientScript)
	start := time.Now()
	out, err := runNode(t, peersDir, oauthClientTimeout, append([]string{script, "--url", url}, args...)...)
	var sum oauthSummary
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
		t.Fatalf("oauth client (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
	}
	for _, e := range sum.Errors {
		t.Errorf("oauth client: %s", e)
	}
	if err != nil || !sum.OK {
		t.Fatalf("oauth client against %s: exit %v, ok=%v\n%s", url, err, sum.OK, out)
	}
	// The script checks these; checking again keeps a weakened script from passing.
	var steps []string
	for _, f := range sum.Flow {
		steps = append(steps, fmt.Sprintf("%s %s %d", f.Method, f.URL, f.Status))
	}
	if len(sum.Flow) == 0 || sum.Flow[0].URL != url || sum.Flow[0].Status != http.StatusUnauthorized {
		t.Errorf("the flow does not start with a 401 from %s: %v", url, steps)
	}
	if sum.ResourceMetadata.Resource != url || sum.TokenRequest["resource"] != url || sum.Authorization.Params["resource"] != url {
		t.Errorf("resource: metadata %q, authorization request %q, token request %q; want %q",
			sum.ResourceMetadata.Resource, sum.Authorization.Params["resource"], sum.TokenRequest["resource"], url)
	}
	if sum.Token == "" || sum.Call.IsError || sum.Call.Text == "" {
		t.Errorf("token %q, call %+v", sum.Token, sum.Call)
	}
	t.Logf("oauth client against %s (%v): client %s, %d tools, %s -> %q; flow:\n  %s",
		url, time.Since(start).Round(time.Millisecond), sum.ClientID, len(sum.Tools), sum.Call.Tool, sum.Call.Text, strings.Join(steps, "\n  "))
	return sum
}

// TestOAuthClientBaseline runs js/oauth_client.mjs against the SDK's own example server with
// OAuth (simpleStreamableHttp.js --oauth --oauth-strict: the SDK's requireBearerAuth, the demo
// authorization server, introspection, strict audience), proving the script and its checks
// against the reference, as the gateway is then judged by the same script. The one difference:
// the example answers an invalid token with 500 (its verifier throws a plain Error), where a
// resource server must answer 401, so the baseline expects 500 there.
func TestOAuthClientBaseline(t *testing.T) {
	requirePeers(t, node22, sdkOAuthDemo(), sdkExpress())
	script := installScript(t, oauthExampleScript)
	mcpAddr, asAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, mcpPort, _ := strings.Cut(mcpAddr, ":")
	_, asPort, _ := strings.Cut(asAddr, ":")
	cmd := exec.Command(node22, script)
	cmd.Dir = peersDir
	cmd.Env = append(os.Environ(), "MCP_PORT="+mcpPort, "MCP_AUTH_PORT="+asPort)
	p := startProcess(t, "sdk-oauth-example", cmd, nil)
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM, 10*time.Second, false) })
	waitListening(t, p, mcpAddr)
	waitListening(t, p, asAddr)
	// The example names itself http://localhost:PORT/mcp (localhost is 127.0.0.1 here).
	sum := runOAuthClient(t, "http://localhost:"+mcpPort+"/mcp", "--issuer", "http://localhost:"+asPort+"/",
		"--tool", "greet", "--args", `{"name":"gate"}`, "--expect", "Hello, gate!", "--invalid-status", "500")
	if got := sum.Negative["noToken"].Status; got != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", got)
	}
}

// TestOAuthIntrospection: the gateway trusts the SDK's demo authorization server, whose opaque
// tokens it checks by introspection (RFC 7662), for a server (/servers/everything/mcp), an
// endpoint (/endpoints/pair/mcp) and the default endpoint (/mcp). For each, the SDK client's
// whole flow through the gateway: 401 with an absolute resource_metadata URL -> the gateway's
// RFC 9728 metadata naming the authorization server and the resource -> authorization server
// metadata -> dynamic registration -> authorization with PKCE and the resource -> token ->
// connected, tools listed, a tool called. The authorization server is strict: it issues tokens
// for the gateway's resource URL only, so the flow succeeding proves the gateway names its
// resource exactly as clients and the authorization server must. Then: no token and a tampered
// token get 401; the token at another resource of the gateway gets 401 (its audience is the
// first); a second client's token (another principal) cannot use the first client's session
// (404 on POST, GET and DELETE, and the session survives). With "scopes" configured, the
// challenge names them, the SDK asks for them, and a token of the same authorization server
// without them gets 403 insufficient_scope naming them.
func TestOAuthIntrospection(t *testing.T) {
	requirePeers(t, node22, sdkOAuthDemo(), sdkExpress(), serverEverything, everythingServer)
	for _, tc := range []struct {
		name, path, other, tool string
		scopes                  []string // gateway.auth.oauth.scopes
	}{
		{name: "server", path: "/servers/everything/mcp", other: "/servers/other/mcp", tool: "echo"},
		{name: "endpoint", path: "/endpoints/pair/mcp", other: "/servers/everything/mcp", tool: "everything__echo"},
		{name: "default", path: "/mcp", other: "/endpoints/pair/mcp", tool: "everything__echo"},
		{name: "scopes", path: "/servers/everything/mcp", other: "/servers/other/mcp", tool: "echo", scopes: []string{"mcp:tools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := testkit.FreeAddr(t)
			base := "http://" + addr
			url := base + tc.path
			as := startAuthServer(t, url)
			authCfg := oauthAuth(as)
			if tc.scopes != nil {
				authCfg["oauth"].(map[string]any)["scopes"] = tc.scopes
			}
			got := startGatewayOn(t, map[string]any{
				"mcpServers": map[string]any{
					"everything": map[string]any{"command": node22, "args": []string{serverEverything, "stdio"}},
					"other":      map[string]any{"command": everythingServer},
				},
				"gateway": map[string]any{
					"auth":      authCfg,
					"endpoints": map[string]any{"pair": map[string]any{"servers": []string{"everything", "other"}}},
				},
			}, addr)
			if got != base {
				t.Fatalf("gateway at %s, want %s", got, base)
			}

			checkResourceMetadata(t, url, as.Issuer)
			first := runOAuthClient(t, url, "--issuer", as.Issuer, "--other-url", base+tc.other,
				"--tool", tc.tool, "--args", `{"message":"hello through oauth"}`, "--expect", "hello through oauth")
			for _, neg := range []string{"noToken", "tampered", "otherResource"} {
				if got := first.Negative[neg].Status; got != http.StatusUnauthorized {
					t.Errorf("%s: status %d, want 401", neg, got)
				}
			}

			// A second registration: another client, another principal.
			second := runOAuthClient(t, url, "--issuer", as.Issuer, "--tool", tc.tool, "--name", "mcpgate-e2e-oauth-2",
				"--args", `{"message":"second"}`, "--expect", "second")
			if second.ClientID == first.ClientID || second.Token == first.Token {
				t.Fatalf("the two runs share a client (%s) or a token", first.ClientID)
			}
			if first.SessionID == "" {
				t.Fatal("the first client reported no session id")
			}
			checkHijack(t, url, first.SessionID, "Bearer "+first.Token, "Bearer "+second.Token)

			if tc.scopes == nil {
				return
			}
			// The SDK asked for the scopes the challenge named, and got them.
			want := strings.Join(tc.scopes, " ")
			if got := first.Authorization.Params["scope"]; got != want {
				t.Errorf("the SDK's authorization request asked for scope %q, want %q (from the challenge)", got, want)
			}
			if !strings.Contains(first.Challenge, `scope="`+want+`"`) {
				t.Errorf("the 401 challenge %q does not name scope %q", first.Challenge, want)
			}
			// A token of the same server for the same resource without the scope: 403
			// insufficient_scope naming the scope (RFC 6750 section 3.1), which the SDK's
			// transport answers by asking for the scope.
			narrow := demoToken(t, as, url, "")
			r := mcpDo(t, http.MethodPost, url, "Bearer "+narrow, "", initializeRequest(1))
			h := r.header.Get("WWW-Authenticate")
			if r.status != http.StatusForbidden || !strings.Contains(h, `error="insufficient_scope"`) || !strings.Contains(h, `scope="`+want+`"`) ||
				!strings.Contains(h, `resource_metadata="`+base+"/.well-known/oauth-protected-resource"+tc.path+`"`) {
				t.Errorf("a token without scope %s: %d, WWW-Authenticate %q; want 403 insufficient_scope naming the scope and the metadata: %s",
					want, r.status, h, brief(r.body))
			}
			if r := mcpDo(t, http.MethodPost, url, "Bearer "+demoToken(t, as, url, want), "", initializeRequest(1)); r.status != http.StatusOK {
				t.Errorf("a token with scope %s from the same flow: %d, want 200: %s", want, r.status, brief(r.body))
			}
		})
	}
}

// demoToken gets an access token from the demo authorization server as a minimal public client
// would, without the SDK: dynamic registration (no secret), authorization with PKCE S256 and the
// resource (the demo approves at once: its redirect carries the code), and the token request.
// scope "" asks for none.
func demoToken(t *testing.T, as authServer, resource, scope string) string {
	t.Helper()
	const redirect = "http://127.0.0.1/oauth/callback" // never contacted: the code is read from Location
	noRedirect := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	reg := map[string]any{
		"client_name": "mcpgate-e2e-go", "redirect_uris": []string{redirect},
		"grant_types": []string{"authorization_code"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none",
	}
	if scope != "" {
		reg["scope"] = scope
	}
	body, _ := json.Marshal(reg)
	resp, err := noRedirect.Post(as.RegistrationEndpoint, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(data, &client) != nil || client.ClientID == "" {
		t.Fatalf("registration: %d: %s", resp.StatusCode, data)
	}

	verifier := strings.Repeat("e2e-verifier-", 5)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {client.ClientID}, "redirect_uri": {redirect},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {resource}, "state": {"e2e"},
	}
	if scope != "" {
		q.Set("scope", scope)
	}
	resp, err = noRedirect.Get(as.AuthorizationEndpoint + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || loc.Query().Get("code") == "" || loc.Query().Get("state") != "e2e" {
		t.Fatalf("authorization: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	form := url.Values{
		"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "code_verifier": {verifier},
		"redirect_uri": {redirect}, "client_id": {client.ClientID}, "resource": {resource},
	}
	resp, err = noRedirect.PostForm(as.TokenEndpoint, form)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Scope       string `json:"scope"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &tok) != nil || tok.AccessToken == "" || tok.Scope != scope {
		t.Fatalf("token request: %d: %s (want scope %q)", resp.StatusCode, data, scope)
	}
	return tok.AccessToken
}

// checkResourceMetadata fetches the RFC 9728 metadata of resource url (the path-inserted
// well-known URL) without credentials and checks it names the resource and the issuer.
func checkResourceMetadata(t *testing.T, resource, issuer string) {
	t.Helper()
	u, err := url.Parse(resource)
	if err != nil {
		t.Fatal(err)
	}
	mdURL := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource" + u.Path
	resp, err := http.Get(mdURL)
	if err != nil {
		t.Fatalf("GET %s: %v", mdURL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: %d %s: %s", mdURL, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(body, &md); err != nil {
		t.Fatalf("GET %s: %v: %s", mdURL, err, body)
	}
	if md.Resource != resource || !slices.Contains(md.AuthorizationServers, issuer) {
		t.Errorf("metadata at %s: %s; want resource %s and authorization server %s", mdURL, body, resource, issuer)
	}
}

// mcpReply is the answer to one raw HTTP request to an MCP endpoint.
type mcpReply struct {
	status int
	header http.Header
	body   string
}

// mcpProtocolVersion is the session-era version the raw requests speak.
const mcpProtocolVersion = "2025-11-25"

// mcpDo sends one raw request to an MCP endpoint: method, authorization ("" for none), session
// ("" for none) and a JSON-RPC body for POST. A GET that opens an SSE stream returns once the
// headers are in (the stream is closed).
func mcpDo(t *testing.T, method, url, authorization, session, body string) mcpReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", mcpProtocolVersion)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	r := mcpReply{status: resp.StatusCode, header: resp.Header}
	if method == http.MethodGet && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return r
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	r.body = string(data)
	return r
}

func initializeRequest(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`, id, mcpProtocolVersion)
}

func toolsListRequest(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)
}

// openSession initializes a session at url with authorization and returns its id.
func openSession(t *testing.T, url, authorization string) string {
	t.Helper()
	r := mcpDo(t, http.MethodPost, url, authorization, "", initializeRequest(1))
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || sid == "" {
		t.Fatalf("initialize at %s: %d (session %q): %s", url, r.status, sid, r.body)
	}
	r = mcpDo(t, http.MethodPost, url, authorization, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized at %s: %d: %s", url, r.status, brief(r.body))
	}
	return sid
}

// checkHijack checks that session sid at url, opened by the owner's credentials, is unknown
// (404) to the intruder's valid credentials, for every method, and still serves its owner after
// those attempts (a DELETE by the intruder did not end it). Without credentials the request is
// refused (401) before any session is looked at.
func checkHijack(t *testing.T, url, sid, owner, intruder string) {
	t.Helper()
	if r := mcpDo(t, http.MethodPost, url, owner, sid, toolsListRequest(7)); r.status != http.StatusOK || !strings.Contains(r.body, `"tools"`) {
		t.Fatalf("the owner's tools/list in its session: %d: %s", r.status, brief(r.body))
	}
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		body := ""
		if method == http.MethodPost {
			body = toolsListRequest(8)
		}
		if r := mcpDo(t, method, url, intruder, sid, body); r.status != http.StatusNotFound {
			t.Errorf("%s with another principal's credentials in the session: %d, want 404: %s", method, r.status, brief(r.body))
		}
	}
	if r := mcpDo(t, http.MethodPost, url, "", sid, toolsListRequest(9)); r.status != http.StatusUnauthorized {
		t.Errorf("POST without credentials in the session: %d, want 401: %s", r.status, brief(r.body))
	}
	if r := mcpDo(t, http.MethodPost, url, owner, sid, toolsListRequest(10)); r.status != http.StatusOK || !strings.Contains(r.body, `"tools"`) {
		t.Errorf("the owner's tools/list after the intruder's attempts: %d, want 200: %s", r.status, brief(r.body))
	}
}

// checkLegacyHijack checks the same for a legacy SSE session (2024-11-05) at sseURL: the
// stream is opened with the owner's credentials; its /messages URL refuses the intruder (404)
// and takes the owner's messages (202).
func checkLegacyHijack(t *testing.T, sseURL, owner, intruder string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sseURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", owner)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", sseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s with the owner's credentials: %d: %s", sseURL, resp.StatusCode, body)
	}
	// The first event is "endpoint", whose data is the /messages URL of this session.
	sc := bufio.NewScanner(resp.Body)
	var endpoint string
	for event := ""; endpoint == "" && sc.Scan(); {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event:"); ok {
			event = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "data:"); ok && event == "endpoint" {
			endpoint = strings.TrimSpace(v)
		}
	}
	if endpoint == "" {
		t.Fatalf("GET %s: no endpoint event (%v)", sseURL, sc.Err())
	}
	base, _ := url.Parse(sseURL)
	msgURL, err := base.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	post := func(authorization string) mcpReply {
		return mcpDo(t, http.MethodPost, msgURL.String(), authorization, "", initializeRequest(1))
	}
	if r := post(intruder); r.status != http.StatusNotFound {
		t.Errorf("POST %s with another principal's credentials: %d, want 404: %s", msgURL.Path, r.status, brief(r.body))
	}
	if r := post(""); r.status != http.StatusUnauthorized {
		t.Errorf("POST %s without credentials: %d, want 401: %s", msgURL.Path, r.status, brief(r.body))
	}
	if r := post(owner); r.status != http.StatusAccepted {
		t.Errorf("POST %s with the owner's credentials: %d, want 202: %s", msgURL.Path, r.status, brief(r.body))
	}
}

var (
	ciKey    = apiKey{"ci", "mcpgate-e2e-ci-key-0123456789abcdef"}
	otherKey = apiKey{"other", "mcpgate-e2e-other-key-fedcba9876543210"}
)
