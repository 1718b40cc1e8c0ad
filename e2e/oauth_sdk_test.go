package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The official TypeScript SDK client against the gateway's own authorization server (issue
// 21), with no other authorization server anywhere: js/oauth_walk.mjs.

const oauthWalkScript = "oauth_walk.mjs"

// walkSummary is what js/oauth_walk.mjs prints.
type walkSummary struct {
	OK           bool     `json:"ok"`
	Errors       []string `json:"errors"`
	Registration struct {
		Request    map[string]any `json:"request"`
		ClientID   string         `json:"clientId"`
		AuthMethod string         `json:"authMethod"`
		Secret     bool           `json:"secret"`
	} `json:"registration"`
	Authorization map[string]string `json:"authorization"`
	Pages         []struct {
		Method string `json:"method"`
		URL    string `json:"url"`
		Status int    `json:"status"`
	} `json:"pages"`
	TokenRequests []struct {
		GrantType    string `json:"grantType"`
		Resource     string `json:"resource"`
		CodeVerifier bool   `json:"codeVerifier"`
		ClientSecret bool   `json:"clientSecret"`
	} `json:"tokenRequests"`
	ClientID string `json:"clientId"`
	First    struct {
		Access, Refresh string
		ExpiresIn       int    `json:"expiresIn"`
		Scope           string `json:"scope"`
	} `json:"first"`
	Second struct{ Access, Refresh string } `json:"second"`
	Calls  []struct {
		Label, Text string
		IsError     bool `json:"isError"`
	} `json:"calls"`
}

// TestOAuthServerTypeScriptClient: the SDK's client registers itself (DCR, a public client),
// authorizes with PKCE S256 and the resource of the server it connects to, a person signs in
// and consents on the gateway's pages, it redeems the code, calls a tool; when its access
// token stops working it refreshes (with the resource) and calls again. Then, as an attacker
// holding the SDK's first refresh token (replaced by the refresh): presenting it revokes the
// grant, so the SDK's current tokens stop working at once.
func TestOAuthServerTypeScriptClient(t *testing.T) {
	requirePeers(t, node22, everythingServer)
	g := startAuthGateway(t, nil)
	resource := g.resource("everything")
	script := installScript(t, oauthWalkScript)
	out, err := runNode(t, peersDir, 2*time.Minute, script, "--url", resource, "--user", e2eUser, "--password", e2ePassword)
	var sum walkSummary
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
		t.Fatalf("oauth_walk.mjs (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
	}
	for _, e := range sum.Errors {
		t.Errorf("oauth_walk.mjs: %s", e)
	}
	if err != nil || !sum.OK {
		t.Fatalf("oauth_walk.mjs: %v\n%s", err, out)
	}

	// The script checks its flow; these checks keep a weakened script from passing.
	if r := sum.Registration; r.ClientID == "" || r.ClientID != sum.ClientID || r.AuthMethod != "none" || r.Secret {
		t.Errorf("registration: %+v; want a public client (auth method none, no secret)", r)
	}
	a := sum.Authorization
	if a["code_challenge_method"] != "S256" || a["code_challenge"] == "" || a["resource"] != resource || a["client_id"] != sum.ClientID {
		t.Errorf("authorization request %v: want S256 PKCE, resource %s, client %s", a, resource, sum.ClientID)
	}
	var grants []string
	for _, tr := range sum.TokenRequests {
		grants = append(grants, tr.GrantType)
		if tr.Resource != resource || tr.ClientSecret || (tr.GrantType == "authorization_code") != tr.CodeVerifier {
			t.Errorf("token request %+v: want resource %s, no secret, a verifier with the code only", tr, resource)
		}
	}
	if strings.Join(grants, ",") != "authorization_code,refresh_token" {
		t.Errorf("token requests %v, want the code then one refresh", grants)
	}
	if len(sum.Calls) != 2 || sum.First.Refresh == "" || sum.Second.Refresh == "" || sum.Second.Refresh == sum.First.Refresh ||
		sum.Second.Access == sum.First.Access {
		t.Fatalf("calls %+v, tokens first %v second %v: want two calls and rotated tokens", sum.Calls, sum.First, sum.Second)
	}
	if sum.First.ExpiresIn <= 0 {
		t.Errorf("the token response's expires_in is %d, want the access token's life", sum.First.ExpiresIn)
	}

	// The SDK's current access token works; the first refresh token is replaced.
	if s := bearerStatus(t, resource, sum.Second.Access); s != http.StatusOK {
		t.Fatalf("the SDK's refreshed access token: %d, want 200", s)
	}
	c := oauthClient{meta: g.meta, id: sum.ClientID}
	if r := c.refresh(t, sum.First.Refresh); r.status != http.StatusBadRequest || r.Error != "invalid_grant" {
		t.Errorf("the SDK's replaced refresh token again: %d: %s; want 400 invalid_grant", r.status, r.body)
	}
	if s := bearerStatus(t, resource, sum.Second.Access); s != http.StatusUnauthorized {
		t.Errorf("the SDK's access token after its grant's refresh token was reused: %d, want 401", s)
	}
	if r := c.refresh(t, sum.Second.Refresh); r.status != http.StatusBadRequest {
		t.Errorf("the SDK's current refresh token after the reuse: %d: %s; want 400", r.status, r.body)
	}
}
