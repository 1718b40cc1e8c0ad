package authserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgate/mcpgate/internal/config"
)

// postRegister sends a registration over HTTP and decodes the JSON answer.
func postRegister(t *testing.T, url, contentType, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/oauth/register", contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return resp, out
}

func TestRegisterPublicClient(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, out := postRegister(t, srv.URL, "application/json", `{
		"redirect_uris": ["http://127.0.0.1:33418/callback", "https://claude.ai/api/mcp/auth_callback"],
		"token_endpoint_auth_method": "none",
		"grant_types": ["refresh_token", "authorization_code"],
		"response_types": ["code"],
		"client_name": "Claude", "client_uri": "https://claude.ai",
		"logo_uri": "https://claude.ai/logo.png", "scope": "mcp", "contacts": ["a@b.c"],
		"software_id": "x", "unknown_extension": {"a": [1, 2]}, "client_name#ja": "クロード"}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %v", resp.StatusCode, out)
	}
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Cache-Control": "no-store", "Access-Control-Allow-Origin": "*",
	} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	id, _ := out["client_id"].(string)
	if len(id) < 20 {
		t.Fatalf("client_id %q: not a random identifier", id)
	}
	if _, ok := out["client_secret"]; ok {
		t.Error("a public client got a secret")
	}
	if out["client_id_issued_at"] != float64(clientsTestStart.Unix()) {
		t.Errorf("client_id_issued_at %v", out["client_id_issued_at"])
	}
	if got := out["token_endpoint_auth_method"]; got != "none" {
		t.Errorf("token_endpoint_auth_method %v", got)
	}
	if got := out["grant_types"].([]any); len(got) != 2 || got[0] != "authorization_code" || got[1] != "refresh_token" {
		t.Errorf("grant_types %v", got)
	}
	if got := out["redirect_uris"].([]any); len(got) != 2 || got[1] != "https://claude.ai/api/mcp/auth_callback" {
		t.Errorf("redirect_uris %v", got)
	}
	if out["client_name"] != "Claude" || out["client_uri"] != "https://claude.ai" {
		t.Errorf("name and uri not echoed: %v", out)
	}
	for _, unused := range []string{"logo_uri", "scope", "contacts", "unknown_extension"} {
		if _, ok := out[unused]; ok {
			t.Errorf("%s echoed though not registered", unused)
		}
	}
	c, err := s.clients.client(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.AuthMethod != clientAuthNone || c.SecretHash != (Hash{}) || c.Name != "Claude" || c.URI != "https://claude.ai" || len(c.RedirectURIs) != 2 || c.Document {
		t.Errorf("stored client %+v", c)
	}
	// A second registration is a second client.
	_, again := postRegister(t, srv.URL, "application/json", `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`)
	if again["client_id"] == id {
		t.Error("two registrations got the same client_id")
	}
}

// TestRegisterWithGoSDKClient registers through the official Go SDK's
// RFC 7591 client, as an MCP client built on it does.
func TestRegisterWithGoSDKClient(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ctx := context.Background()
	got, err := oauthex.RegisterClient(ctx, srv.URL+"/oauth/register", &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{"http://localhost:8085/callback"},
		TokenEndpointAuthMethod: "none",
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              "go-sdk client",
		Scope:                   "mcp",
		SoftwareID:              "mcpgate-test",
	}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if got.ClientID == "" || got.ClientSecret != "" || !got.ClientIDIssuedAt.Equal(clientsTestStart) || got.TokenEndpointAuthMethod != "none" ||
		len(got.RedirectURIs) != 1 || got.ClientName != "go-sdk client" {
		t.Fatalf("registration %+v", got)
	}
	if c, err := s.clients.client(ctx, got.ClientID); err != nil || c.Name != "go-sdk client" {
		t.Fatalf("registered client not found: %+v, %v", c, err)
	}
	_, err = oauthex.RegisterClient(ctx, srv.URL+"/oauth/register", &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{"https://claude.ai.evil.com/api/mcp/auth_callback"},
	}, srv.Client())
	var refused *oauthex.ClientRegistrationError
	if !errors.As(err, &refused) || refused.ErrorCode != "invalid_redirect_uri" || !strings.Contains(refused.ErrorDescription, "redirect_uris[0]") {
		t.Fatalf("look-alike redirect: %v, want invalid_redirect_uri naming redirect_uris[0]", err)
	}
}

func TestRegisterConfidentialClient(t *testing.T) {
	for _, method := range []string{"", clientAuthBasic, clientAuthPost} {
		t.Run("method="+method, func(t *testing.T) {
			s := newClientsServer(t, newClientsClock(), nil)
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			body := `{"redirect_uris":["https://claude.ai/api/mcp/auth_callback"]`
			if method != "" {
				body += `,"token_endpoint_auth_method":"` + method + `"`
			}
			resp, out := postRegister(t, srv.URL, "application/json; charset=utf-8", body+"}")
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("status %d: %v", resp.StatusCode, out)
			}
			want := method
			if want == "" {
				want = clientAuthBasic // RFC 7591 2: the default
			}
			secret, _ := out["client_secret"].(string)
			if out["token_endpoint_auth_method"] != want || len(secret) < 40 || out["client_secret_expires_at"] != float64(0) {
				t.Fatalf("answer %v", out)
			}
			c, err := s.store.Client(context.Background(), out["client_id"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if c.SecretHash != sha256.Sum256([]byte(secret)) || c.AuthMethod != want {
				t.Errorf("stored %+v: not the secret's hash", c)
			}
			stored, _ := json.Marshal(c)
			if bytes.Contains(stored, []byte(secret)) {
				t.Error("the secret is stored in clear")
			}
		})
	}
}

func TestRegisterRefusals(t *testing.T) {
	clock := newClientsClock()
	s := newClientsServer(t, clock, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	long := strings.Repeat("x", maxClientName+1)
	var many []string
	for i := range maxRedirectURIs + 1 {
		many = append(many, `"http://127.0.0.1:`+string(rune('1'+i%9))+`/cb`+strings.Repeat("x", i)+`"`)
	}
	ok := `"redirect_uris":["https://claude.ai/api/mcp/auth_callback"]`
	for _, tc := range []struct {
		name, body, code, field string
	}{
		{"no redirect uris", `{"client_name":"x"}`, "invalid_redirect_uri", "redirect_uris"},
		{"empty redirect uris", `{"redirect_uris":[]}`, "invalid_redirect_uri", "redirect_uris"},
		{"redirect uris a string", `{"redirect_uris":"https://claude.ai/api/mcp/auth_callback"}`, "invalid_redirect_uri", "redirect_uris"},
		{"redirect uri a number", `{"redirect_uris":["https://claude.ai/api/mcp/auth_callback", 7]}`, "invalid_redirect_uri", "redirect_uris/1"},
		{"look-alike host", `{"redirect_uris":["https://claude.ai/api/mcp/auth_callback","https://claude.ai.evil.com/api/mcp/auth_callback"]}`, "invalid_redirect_uri", "redirect_uris[1]"},
		{"userinfo", `{"redirect_uris":["https://claude.ai@evil.com/api/mcp/auth_callback"]}`, "invalid_redirect_uri", "redirect_uris[0]"},
		{"fragment", `{"redirect_uris":["https://claude.ai/api/mcp/auth_callback#x"]}`, "invalid_redirect_uri", "redirect_uris[0]"},
		{"path trick", `{"redirect_uris":["https://claude.ai/api/mcp/auth_callback/../x"]}`, "invalid_redirect_uri", "redirect_uris[0]"},
		{"too many redirect uris", `{"redirect_uris":[` + strings.Join(many, ",") + `]}`, "invalid_redirect_uri", "redirect_uris"},
		{"client credentials", `{` + ok + `,"grant_types":["client_credentials"]}`, "invalid_client_metadata", "grant_types[0]"},
		{"implicit", `{` + ok + `,"grant_types":["authorization_code","implicit"]}`, "invalid_client_metadata", "grant_types[1]"},
		{"refresh only", `{` + ok + `,"grant_types":["refresh_token"]}`, "invalid_client_metadata", "grant_types"},
		{"token response", `{` + ok + `,"response_types":["token"]}`, "invalid_client_metadata", "response_types[0]"},
		{"no response type", `{` + ok + `,"response_types":[]}`, "invalid_client_metadata", "response_types"},
		{"private key jwt", `{` + ok + `,"token_endpoint_auth_method":"private_key_jwt"}`, "invalid_client_metadata", "token_endpoint_auth_method"},
		{"tls client auth", `{` + ok + `,"token_endpoint_auth_method":"tls_client_auth"}`, "invalid_client_metadata", "token_endpoint_auth_method"},
		{"name too long", `{` + ok + `,"client_name":"` + long + `"}`, "invalid_client_metadata", "client_name"},
		{"name with bidi override", `{` + ok + `,"client_name":"Claude\u202egnp.exe"}`, "invalid_client_metadata", "client_name"},
		{"name a number", `{` + ok + `,"client_name":5}`, "invalid_client_metadata", "client_name"},
		{"client uri javascript", `{` + ok + `,"client_uri":"javascript:alert(1)"}`, "invalid_client_metadata", "client_uri"},
		{"client uri http", `{` + ok + `,"client_uri":"http://evil.com"}`, "invalid_client_metadata", "client_uri"},
		{"client uri userinfo", `{` + ok + `,"client_uri":"https://claude.ai@evil.com"}`, "invalid_client_metadata", "client_uri"},
		{"duplicate key", `{` + ok + `,"redirect_uris":["https://evil.com/cb"]}`, "invalid_client_metadata", "duplicate"},
		{"keys differ in case", `{"REDIRECT_URIS":["https://claude.ai/api/mcp/auth_callback"]}`, "invalid_redirect_uri", "redirect_uris"},
		{"not json", `redirect_uris=x`, "invalid_client_metadata", "JSON"},
		{"an array", `[{` + ok + `}]`, "invalid_client_metadata", ""},
		{"trailing data", `{` + ok + `} {}`, "invalid_client_metadata", "JSON"},
		{"invalid utf-8", "{" + ok + ",\"client_name\":\"\xff\"}", "invalid_client_metadata", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock.Advance(registerEvery) // refused registrations spend the address's tokens too
			resp, out := postRegister(t, srv.URL, "application/json", tc.body)
			if resp.StatusCode != http.StatusBadRequest || out["error"] != tc.code {
				t.Fatalf("status %d, %v; want 400 %s", resp.StatusCode, out, tc.code)
			}
			if desc, _ := out["error_description"].(string); !strings.Contains(desc, tc.field) {
				t.Errorf("error_description %q does not name %q", desc, tc.field)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Error("an error without CORS: a browser client cannot read why")
			}
		})
	}
	if cs, _ := s.store.Clients(context.Background()); len(cs) != 0 {
		t.Errorf("%d clients stored by refused registrations", len(cs))
	}
}

func TestRegisterBounds(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, out := postRegister(t, srv.URL, "text/plain", `{"redirect_uris":["http://127.0.0.1/cb"]}`)
	if resp.StatusCode != http.StatusBadRequest || out["error"] != "invalid_client_metadata" {
		t.Errorf("text/plain: %d %v", resp.StatusCode, out)
	}
	huge := `{"redirect_uris":["http://127.0.0.1/cb"],"x":"` + strings.Repeat("a", maxRegistrationBody) + `"}`
	resp, out = postRegister(t, srv.URL, "application/json", huge)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || out["error"] != "invalid_client_metadata" {
		t.Errorf("oversized body: %d %v", resp.StatusCode, out)
	}
}

func TestRegisterMethodsAndCORS(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/oauth/register", nil)
	req.Header.Set("Origin", "https://inspector.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "content-type") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, err = http.Get(srv.URL + "/oauth/register")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
}

func TestRegistrationOff(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), func(c *config.AuthServer) { c.Registration = false })
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/oauth/register", "application/json", strings.NewReader(`{"redirect_uris":["http://127.0.0.1/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("registration off: %d, want 404", resp.StatusCode)
	}
}

func TestRegisterRateLimitPerAddress(t *testing.T) {
	clock := newClientsClock()
	s := newClientsServer(t, clock, nil)
	body := `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`
	post := func(addr string) int {
		r := httptest.NewRequest(http.MethodPost, "/oauth/register", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w.Code
	}
	for i := range registerBurst {
		if code := post("203.0.113.7:1000"); code != http.StatusCreated {
			t.Fatalf("registration %d: %d", i, code)
		}
	}
	if code := post("203.0.113.7:1001"); code != http.StatusTooManyRequests {
		t.Fatalf("registration past the burst: %d, want 429", code)
	}
	if code := post("203.0.113.8:1000"); code != http.StatusCreated {
		t.Fatalf("another address: %d, want 201", code)
	}
	clock.Advance(registerEvery)
	if code := post("203.0.113.7:1000"); code != http.StatusCreated {
		t.Fatalf("after a refill: %d, want 201", code)
	}
	if code := post("203.0.113.7:1000"); code != http.StatusTooManyRequests {
		t.Fatalf("a refill is one registration: %d, want 429", code)
	}
}

func TestAddrLimiter(t *testing.T) {
	now := clientsTestStart
	l := newAddrLimiter(time.Minute, 1, 2)
	req := func(addr string) string {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.RemoteAddr = addr
		return registerBucket(r)
	}
	if !l.allow(req("[2001:db8:1:2::1]:5"), now) {
		t.Fatal("first registration of an address refused")
	}
	if l.allow(req("[2001:db8:1:2:ffff::9]:6"), now) {
		t.Error("another address of the same /64 has a bucket of its own")
	}
	if !l.allow(req("[2001:db8:1:3::1]:5"), now) {
		t.Error("another /64 shares a bucket")
	}
	// The table (2) is full of spent buckets: a new address waits.
	if l.allow(req("192.0.2.1:1"), now) {
		t.Error("a new address got a bucket in a full table")
	}
	// Once the buckets have refilled they are dropped for new ones.
	if !l.allow(req("192.0.2.1:1"), now.Add(time.Minute)) {
		t.Error("a full table of refilled buckets refused a new address")
	}
	if !l.allow(req("[::ffff:192.0.2.2]:1"), now.Add(time.Minute)) || l.allow(req("192.0.2.2:9"), now.Add(time.Minute)) {
		t.Error("an IPv4-mapped address is not the IPv4 address's bucket")
	}
}

func TestRegisterTableFull(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	s.clients.maxClients = 1
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	body := `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`
	resp, first := postRegister(t, srv.URL, "application/json", body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("first registration: %d %v", resp.StatusCode, first)
	}
	if err := s.store.PutGrant(context.Background(), &Grant{ID: "g", ClientID: first["client_id"].(string), CreatedAt: clientsTestStart}); err != nil {
		t.Fatal(err)
	}
	resp, out := postRegister(t, srv.URL, "application/json", body)
	if resp.StatusCode != http.StatusServiceUnavailable || out["error"] != "temporarily_unavailable" {
		t.Fatalf("registration into a full table of used clients: %d %v, want 503", resp.StatusCode, out)
	}
	if _, err := s.clients.client(context.Background(), first["client_id"].(string)); err != nil {
		t.Fatalf("the client with a grant was pruned: %v", err)
	}
}
