package gateway

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// This file serves gateway.tls: HTTPS on the main listener, HTTP/2 by ALPN
// and HTTP/1.1 beside it, with the certificate read again whenever its
// files change, so a renewed certificate (certbot, cert-manager, a
// Kubernetes secret) needs no restart and no signal.

// certReloadCheck is how often, at most, a handshake looks at the files'
// metadata: a burst of handshakes costs one pair of stats, and a renewal
// is served within this long of being written.
const certReloadCheck = time.Second

// certReloader is the tls.Config.GetCertificate of a gateway.tls block. A
// file that cannot be loaded (half written, or a key that does not match
// its new certificate yet) keeps the previous certificate, logs a warning
// once per change and is tried again on a later handshake.
//
// One handshake at a time looks at the files, without holding mu: the
// others meanwhile get the current certificate at once, so a slow disk
// or a file that cannot be read holds up no handshake but that one (with
// mu held, every handshake queued behind the one reading, and a named
// pipe in a certificate's place stopped HTTPS for good).
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time // time.Now; tests step it

	// failed counts loads that failed after the first (the previous
	// certificate stayed in use).
	failed atomic.Int64

	mu sync.Mutex
	// guarded by mu:
	cert      *tls.Certificate
	stamp     [2]fileStamp // of certFile and keyFile when cert was loaded, or last tried
	checkedAt time.Time
	looking   bool // a handshake is looking at the files
}

// fileStamp is what tells a changed file: a rename onto the path (a new
// inode: how cert-manager and certbot swap files), a new size or a new
// modification time.
type fileStamp struct {
	info os.FileInfo
}

func (a fileStamp) same(b fileStamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == b.info
	}
	return os.SameFile(a.info, b.info) && a.info.Size() == b.info.Size() && a.info.ModTime().Equal(b.info.ModTime())
}

// newCertReloader loads the block's certificate: an error names the key
// and file at fault.
func newCertReloader(t *config.TLS, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: t.CertFile, keyFile: t.KeyFile, log: log, now: time.Now}
	r.stamp = r.stat()
	cert, err := config.LoadKeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("gateway.tls: certFile %q, keyFile %q: %w", r.certFile, r.keyFile, err)
	}
	r.cert = &cert
	r.checkedAt = r.now()
	return r, nil
}

func (r *certReloader) stat() [2]fileStamp {
	var s [2]fileStamp
	for i, f := range []string{r.certFile, r.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			s[i].info = fi
		}
	}
	return s
}

// GetCertificate returns the current certificate, loading the files again
// first when they changed since the last look (at most once per
// certReloadCheck, and by one handshake at a time).
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	now := r.now()
	if r.looking || now.Sub(r.checkedAt) < certReloadCheck {
		cert := r.cert
		r.mu.Unlock()
		return cert, nil
	}
	r.checkedAt, r.looking = now, true
	prev := r.stamp
	r.mu.Unlock()

	st := r.stat()
	changed := !st[0].same(prev[0]) || !st[1].same(prev[1])
	var cert tls.Certificate
	var err error
	if changed {
		cert, err = config.LoadKeyPair(r.certFile, r.keyFile)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.looking = false
	if !changed {
		return r.cert, nil
	}
	r.stamp = st
	if err != nil {
		// Kept: serving the old certificate until it expires beats
		// refusing every handshake because one file is half written.
		r.failed.Add(1)
		r.log.Warn("gateway.tls: the changed certificate files cannot be loaded; serving the previous certificate",
			"cert_file", r.certFile, "key_file", r.keyFile, "err", err)
		return r.cert, nil
	}
	r.cert = &cert
	r.log.Info("gateway.tls: certificate reloaded", "cert_file", r.certFile)
	return r.cert, nil
}

// tlsConfig returns the TLS configuration of gateway.tls for the main
// listener: HTTP/2 first by ALPN, HTTP/1.1 beside it, TLS 1.2 at least.
func tlsConfig(r *certReloader) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: r.GetCertificate,
	}
}

// serveHTTP returns the function that serves srv on ln: HTTPS with
// gateway.tls (ServeTLS configures HTTP/2; the certificate comes from
// GetCertificate), plain HTTP without. srv is configured before it runs.
func (g *Gateway) serveHTTP(srv *http.Server, ln net.Listener) func() error {
	if g.certs == nil {
		return func() error { return srv.Serve(ln) }
	}
	srv.TLSConfig = tlsConfig(g.certs)
	return func() error { return srv.ServeTLS(ln, "", "") }
}
