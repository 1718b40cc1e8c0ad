//go:build unix

package gateway

import (
	"crypto/tls"
	"math/big"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// servedOrHung is served, failing the test instead of waiting when the
// handshake does not complete (a hang detector, no bound on the code).
func servedOrHung(t *testing.T, addr string) *big.Int {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second, Deadline: time.Now().Add(10 * time.Second)}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the test reads what is served
	if err != nil {
		t.Errorf("handshake: %v", err)
		return nil
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// A named pipe put in the certificate's place (a botched deploy, a
// secrets tool that serves files as pipes) keeps the previous
// certificate, counted as a failed load, and every handshake completes,
// the one that looks at the files included. The handshake that looked
// read the pipe holding the reloader's lock: it waited for a writer that
// never came, and every later handshake waited on the lock, so the
// gateway accepted no HTTPS connection until restarted (and each one
// tried left a goroutine behind). A valid certificate put back is served.
func TestTLSCertificateSwappedForPipe(t *testing.T) {
	g, certFile, keyFile := startTLSGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	addr := strings.TrimPrefix(g.URL, "https://")
	clock := &stepClock{now: time.Now()}
	r := g.gw.certs
	r.mu.Lock()
	r.now = clock.Now
	r.mu.Unlock()
	first := serial(t, certFile, keyFile)

	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(certFile, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// On failure, a handshake stuck reading the pipe is freed at the end.
	t.Cleanup(func() {
		if w, err := os.OpenFile(certFile, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	clock.step(certReloadCheck)
	for i := range 3 {
		if got := servedOrHung(t, addr); got == nil || got.Cmp(first) != 0 {
			t.Fatalf("handshake %d with a pipe as the certificate: served %v, want the previous certificate %v", i, got, first)
		}
	}
	if n := r.failed.Load(); n != 1 {
		t.Errorf("failed loads counted: %d, want 1", n)
	}

	dir := t.TempDir()
	newCert, newKey := testkit.WriteCert(t, dir, "renewed", "127.0.0.1")
	second := serial(t, newCert, newKey)
	for _, mv := range [][2]string{{newKey, keyFile}, {newCert, certFile}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	clock.step(certReloadCheck)
	if got := servedOrHung(t, addr); got == nil || got.Cmp(second) != 0 {
		t.Errorf("after the pipe was replaced: served %v, want the new certificate %v", got, second)
	}
}
