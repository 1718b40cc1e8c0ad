package config

import (
	"crypto/tls"
	"encoding/json"
	"os"
)

// TLS is the "gateway.tls" block: the gateway serves HTTPS itself (HTTP/2
// by ALPN, and HTTP/1.1), for running without a TLS proxy in front. Nil
// (the default): plain HTTP. The block applies at start; the files it
// names are read again whenever they change (a renewed certificate needs
// no restart).
type TLS struct {
	// CertFile is a PEM file holding the certificate chain, leaf first
	// (key "certFile"; ${VAR} expanded). Required.
	CertFile string
	// KeyFile is a PEM file holding the certificate's private key (key
	// "keyFile"; ${VAR} expanded). Required.
	KeyFile string
}

// tls decodes "gateway.tls".
func (d *decoder) tls(path string, raw json.RawMessage, dst **TLS) {
	t := &TLS{}
	if d.fields(path, raw, `an object like {"certFile": "/etc/mcpgate/tls.crt", "keyFile": "/etc/mcpgate/tls.key"}`, func(key, p string, v json.RawMessage) bool {
		switch key {
		case "certFile":
			d.str(p, v, &t.CertFile, true)
		case "keyFile":
			d.str(p, v, &t.KeyFile, true)
		default:
			return false
		}
		return true
	}) {
		*dst = t
	}
}

// checkTLS records problems with the tls block: both files named,
// readable, and a certificate with its key. Each problem names its key
// and the file, so a typo in a path is found before anything starts.
func (g *Gateway) checkTLS(ps *Problems, path string) {
	t := g.TLS
	if t == nil {
		return
	}
	p := join(path, "tls")
	readable := true
	for _, f := range []struct{ key, file string }{{"certFile", t.CertFile}, {"keyFile", t.KeyFile}} {
		if f.file == "" {
			ps.add(join(p, f.key), "is required (a PEM file)")
			readable = false
			continue
		}
		if _, err := os.ReadFile(f.file); err != nil {
			ps.add(join(p, f.key), "cannot read %q: %v", f.file, unwrapPath(err))
			readable = false
		}
	}
	if !readable {
		return
	}
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		ps.add(p, "certFile %q and keyFile %q are not a PEM certificate and its private key: %v", t.CertFile, t.KeyFile, err)
	}
}

// unwrapPath drops the *os.PathError's path and operation, which the
// problem already names.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
