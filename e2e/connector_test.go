package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The connector recipe (docs/auth.md), end to end: a TLS proxy in front of a loopback gateway, keeping
// the public Host (as Caddy, nginx and Traefik do by default) and adding X-Forwarded-Proto, the
// gateway with auth on and gateway.auth.publicUrl set (and no allowedHosts), and the official
// TypeScript SDK client walking the OAuth flow through the proxy under the public name.

const (
	resolveHookScript = "resolve_hook.mjs"
	publicHost        = "mcp.example.com"
)

// connectorProxy is the recipe's TLS proxy: an httptest TLS server with a certificate for
// publicHost running httputil.ReverseProxy to the gateway at target. It keeps Host, sets
// X-Forwarded-For/-Host/-Proto, streams responses and keeps its connections to the gateway
// alive, full duplex (auth_apikey_test.go says why). It records the Host and X-Forwarded-Proto
// the gateway was sent.
type connectorProxy struct {
	srv      *httptest.Server
	certFile string
	mu       sync.Mutex
	hosts    map[string]int // Host sent upstream -> requests
	protos   map[string]int // X-Forwarded-Proto sent upstream -> requests
}

func startConnectorProxy(t *testing.T, target string) *connectorProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := testkit.WriteCert(t, t.TempDir(), "proxy", publicHost)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	p := &connectorProxy{certFile: certFile, hosts: map[string]int{}, protos: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.SetXForwarded()
			r.Out.Host = r.In.Host
			p.mu.Lock()
			p.hosts[r.Out.Host]++
			p.protos[r.Out.Header.Get("X-Forwarded-Proto")]++
			p.mu.Unlock()
		},
		FlushInterval: -1,
	}
	p.srv = httptest.NewUnstartedServer(fullDuplex(rp))
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

// publicURL is the proxy's URL under the public name.
func (p *connectorProxy) publicURL() string {
	_, port, _ := net.SplitHostPort(p.srv.Listener.Addr().String())
	return "https://" + publicHost + ":" + port
}

// client is an HTTP client that reaches the proxy under the public name and trusts its
// certificate.
func (p *connectorProxy) client(t *testing.T) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(p.certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	addr := p.srv.Listener.Addr().String()
	var d net.Dialer
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestConnectorRecipe: the recipe as docs/auth.md gives it. The authorization server (the SDK's
// demo, strict) issues tokens only for the public resource URL https://mcp.example.com:PORT/...;
// the gateway listens on loopback with that publicUrl and no allowedHosts; the SDK client is
// given the public URL and reaches the proxy under that name (resolve_hook.mjs maps the name to
// 127.0.0.1; TLS is checked against the proxy's certificate for it). The whole flow must pass:
// 401 whose resource_metadata is the absolute https URL on the public host, the metadata naming
// the public resource, registration, authorization and token for it, then calls with the token.
// The gateway must have been sent the public Host and X-Forwarded-Proto: https.
func TestConnectorRecipe(t *testing.T) {
	hook := filepath.Join(peersDir, "node_modules", "undici", "package.json")
	requirePeers(t, node22, sdkOAuthDemo(), sdkExpress(), serverEverything, hook)
	gwAddr := testkit.FreeAddr(t)
	p := startConnectorProxy(t, "http://"+gwAddr)
	public := p.publicURL()
	resource := public + "/servers/everything/mcp"
	as := startAuthServer(t, resource)

	authCfg := oauthAuth(as)
	authCfg["publicUrl"] = public
	if got := startGatewayOn(t, map[string]any{
		"mcpServers": map[string]any{
			"everything": map[string]any{"command": node22, "args": []string{serverEverything, "stdio"}},
		},
		"gateway": map[string]any{"auth": authCfg},
	}, gwAddr); got != "http://"+gwAddr {
		t.Fatalf("gateway at %s, want http://%s", got, gwAddr)
	}

	// The metadata, fetched through the proxy under the public name.
	resp, err := p.client(t).Get(public + "/.well-known/oauth-protected-resource/servers/everything/mcp")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var md struct {
		Resource string `json:"resource"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &md) != nil || md.Resource != resource {
		t.Fatalf("resource metadata through the proxy: %d %s; want resource %s", resp.StatusCode, body, resource)
	}

	installScript(t, resolveHookScript)
	t.Setenv("NODE_OPTIONS", "--import="+filepath.Join(peersDir, resolveHookScript))
	t.Setenv("MCPGATE_E2E_RESOLVE", publicHost+"=127.0.0.1")
	t.Setenv("NODE_EXTRA_CA_CERTS", p.certFile)
	sum := runOAuthClient(t, resource, "--issuer", as.Issuer, "--tool", "echo",
		"--args", `{"message":"through the connector recipe"}`, "--expect", "through the connector recipe")
	wantMetadata := `resource_metadata="` + public + "/.well-known/oauth-protected-resource/servers/everything/mcp" + `"`
	if !strings.Contains(sum.Challenge, wantMetadata) {
		t.Errorf("the 401 challenge %q does not carry %s (absolute https, on the public host)", sum.Challenge, wantMetadata)
	}
	if got := sum.Negative["noToken"].Status; got != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", got)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	wantHost := strings.TrimPrefix(public, "https://")
	for h := range p.hosts {
		if h != wantHost {
			t.Errorf("the proxy sent Host %q upstream, want only %q: %v", h, wantHost, p.hosts)
		}
	}
	if p.hosts[wantHost] == 0 || len(p.protos) != 1 || p.protos["https"] == 0 {
		t.Errorf("upstream Host %v and X-Forwarded-Proto %v; want the public host and https on every request", p.hosts, p.protos)
	}
}
