package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// adminToken is the admin API's static token in TestOAuthServerAdminRevoke.
const adminToken = "mcpgate-e2e-admin-token-0123456789"

// adminDo sends an admin API request to the gateway at base and returns status and body.
func adminDo(t *testing.T, method, u string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestOAuthServerAdminRevoke: the admin API lists the grant a person made (user, client,
// resource) and revokes it: the grant's access token is refused at once, its refresh token
// too. Deleting the client ends its other grants the same way.
func TestOAuthServerAdminRevoke(t *testing.T) {
	requirePeers(t, everythingServer)
	addr := testkit.FreeAddr(t)
	cfg := authGatewayConfig(t, "http://"+addr, nil)
	cfg.Gateway["admin"] = map[string]any{"token": adminToken}
	base := startGatewayFile(t, writeGatewayConfig(t, cfg), addr)
	g := &authGateway{base: base, meta: fetchASMetadata(t, base)}
	c := publicClient(t, g.meta, loopbackRedirect)
	resource := g.resource("everything")
	first, second := c.grant(t, resource), c.grant(t, resource)

	status, body := adminDo(t, http.MethodGet, g.base+"/admin/oauth/grants")
	var list struct {
		Grants []struct{ ID, User, ClientID, Resource string } `json:"grants"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Grants) != 2 {
		t.Fatalf("GET /admin/oauth/grants: %d: %s; want the two grants", status, body)
	}
	for _, gr := range list.Grants {
		if gr.User != e2eUser || gr.ClientID != c.id || gr.Resource != resource {
			t.Errorf("grant %+v: want user %s, client %s, resource %s", gr, e2eUser, c.id, resource)
		}
	}

	// Which listed grant is first's is not visible from outside: revoke one, and exactly one
	// of the two access tokens must die at once.
	if status, body := adminDo(t, http.MethodDelete, g.base+"/admin/oauth/grants/"+url.PathEscape(list.Grants[0].ID)); status != http.StatusOK {
		t.Fatalf("DELETE the grant: %d: %s", status, body)
	}
	a, b := bearerStatus(t, resource, first.AccessToken), bearerStatus(t, resource, second.AccessToken)
	if (a == http.StatusUnauthorized) == (b == http.StatusUnauthorized) || (a != http.StatusOK && b != http.StatusOK) {
		t.Errorf("after revoking one of two grants: the access tokens get %d and %d, want one 401 and one 200", a, b)
	}

	if status, body := adminDo(t, http.MethodDelete, g.base+"/admin/oauth/clients/"+url.PathEscape(c.id)); status != http.StatusOK {
		t.Fatalf("DELETE the client: %d: %s", status, body)
	}
	for name, tok := range map[string]tokenResponse{"first": first, "second": second} {
		if s := bearerStatus(t, resource, tok.AccessToken); s != http.StatusUnauthorized {
			t.Errorf("the %s grant's access token after its client was deleted: %d, want 401", name, s)
		}
		if r := c.refresh(t, tok.RefreshToken); r.status == http.StatusOK {
			t.Errorf("the %s grant's refresh token after its client was deleted: 200", name)
		}
	}
}
