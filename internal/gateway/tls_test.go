package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// startTLSGateway runs a gateway for cfg with gateway.tls set to a fresh
// certificate for 127.0.0.1, and a client of it that trusts the
// certificate and speaks HTTP/2 (and HTTP/1.1).
func startTLSGateway(t *testing.T, cfg *config.Config) (g *testGateway, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = testkit.WriteCert(t, dir, "gateway", "127.0.0.1")
	cfg.Gateway.TLS = &config.TLS{CertFile: certFile, KeyFile: keyFile}
	g = startGateway(t, cfg)
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	g.URL = strings.Replace(g.URL, "http://", "https://", 1)
	g.http = &http.Client{Transport: tr}
	return g, certFile, keyFile
}

// TestTLSServesHTTP2: with gateway.tls the gateway serves HTTPS, a TLS
// client negotiates h2 by ALPN, and a session works over it, streaming
// included: a tools/call's SSE stream carries the server's sampling
// request while the call is open, the client answers it on another
// request of the same HTTP/2 connection, and the result ends the stream.
func TestTLSServesHTTP2(t *testing.T) {
	g, _, _ := startTLSGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	resp, err := g.http.Get(g.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
		t.Fatalf("GET /healthz: %s, ALPN %q; want HTTP/2 negotiated as h2", resp.Proto, resp.TLS.NegotiatedProtocol)
	}

	c := g.client("fake")
	c.connect(t)
	var asked bool
	req := c.request(http.MethodPost, callBody("7", "sample", map[string]string{"prompt": "over h2"}, `{"progressToken":"p7"}`))
	r := c.do(t, req, func(raw json.RawMessage) {
		m := decode(t, raw)
		if m.Method != "sampling/createMessage" {
			return
		}
		asked = true
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"sampled over h2"},"model":"m"}}`, m.ID)
		if r := c.post(t, answer); r.Status != http.StatusAccepted {
			t.Errorf("answer: status %d", r.Status)
		}
	})
	if !r.SSE || !asked {
		t.Fatalf("the call's reply: SSE %v, sampling request seen %v; want both", r.SSE, asked)
	}
	if got := toolText(t, r.final(t)); got != "sampled over h2" {
		t.Fatalf("tool result %q", got)
	}
	// A reply with progress notifications first is a stream too.
	r = c.post(t, callBody("8", "echo", map[string]string{"message": "hi"}, `{"progressToken":"p8"}`))
	if !r.SSE || len(r.Msgs) != 4 || toolText(t, r.final(t)) != "hi" {
		t.Fatalf("echo with progress over h2: SSE %v, %d messages, want 3 progress and the result", r.SSE, len(r.Msgs))
	}
}

// served returns the serial number of the certificate a TLS handshake
// with addr gets.
func served(t *testing.T, addr string) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the test reads what is served
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// serial returns the serial number of the PEM certificate in file.
func serial(t *testing.T, certFile, keyFile string) *big.Int {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber
}

// stepClock is an injected clock the test moves forward.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestTLSCertificateReloaded: the certificate files swapped (renamed over
// the old ones, as certbot and cert-manager do) are served from the next
// handshake after the check interval, with no restart; a swap to files
// that do not load (a key of another certificate) keeps the previous
// certificate and is counted.
func TestTLSCertificateReloaded(t *testing.T) {
	g, certFile, keyFile := startTLSGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	addr := strings.TrimPrefix(g.URL, "https://")
	clock := &stepClock{now: time.Now()}
	r := g.gw.certs
	r.mu.Lock()
	r.now = clock.Now
	r.mu.Unlock()

	first := serial(t, certFile, keyFile)
	if got := served(t, addr); got.Cmp(first) != 0 {
		t.Fatalf("served serial %v, want the configured certificate's %v", got, first)
	}
	// The renewal: new files written beside the old ones, then renamed
	// over them.
	dir := t.TempDir()
	newCert, newKey := testkit.WriteCert(t, dir, "renewed", "127.0.0.1")
	second := serial(t, newCert, newKey)
	for _, mv := range [][2]string{{newKey, keyFile}, {newCert, certFile}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := served(t, addr); got.Cmp(first) != 0 {
		t.Fatalf("within the check interval: served %v, want still %v", got, first)
	}
	clock.step(certReloadCheck)
	if got := served(t, addr); got.Cmp(second) != 0 {
		t.Fatalf("after the swap: served serial %v, want the new certificate's %v", got, second)
	}

	// A broken swap: a certificate whose key is not in keyFile.
	_, otherKey := testkit.WriteCert(t, dir, "other", "127.0.0.1")
	if err := os.Rename(otherKey, keyFile); err != nil {
		t.Fatal(err)
	}
	clock.step(certReloadCheck)
	if got := served(t, addr); got.Cmp(second) != 0 {
		t.Fatalf("after a broken swap: served %v, want the previous certificate %v", got, second)
	}
	if n := r.failed.Load(); n != 1 {
		t.Errorf("failed loads counted: %d, want 1", n)
	}
}

// TestTLSBadFilesStopStart: a tls block whose files do not load stops
// Start with an error naming the files.
func TestTLSBadFilesStopStart(t *testing.T) {
	dir := t.TempDir()
	certFile, _ := testkit.WriteCert(t, dir, "a", "127.0.0.1")
	_, otherKey := testkit.WriteCert(t, dir, "b", "127.0.0.1")
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.TLS = &config.TLS{CertFile: certFile, KeyFile: otherKey}
	g, err := Start(cfg, testLogger(t))
	if err == nil {
		g.stopServers()
		t.Fatal("Start succeeded with a key that is not the certificate's")
	}
	if !strings.Contains(err.Error(), "gateway.tls") || !strings.Contains(err.Error(), filepath.Base(otherKey)) {
		t.Errorf("error %q does not name gateway.tls and the key file", err)
	}
}
