package config

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
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
		if _, err := readPEM(f.file); err != nil {
			ps.add(join(p, f.key), "cannot read %q: %v", f.file, unwrapPath(err))
			readable = false
		}
	}
	if !readable {
		return
	}
	if _, err := LoadKeyPair(t.CertFile, t.KeyFile); err != nil {
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

// maxPEMFile bounds a certificate or key file: a chain is a few kilobytes.
const maxPEMFile = 1 << 20

// errNotPEMFile is the error of a certificate or key path that names no
// regular file (a named pipe, a device, a directory).
var errNotPEMFile = errors.New("not a regular file")

// LoadKeyPair is tls.LoadX509KeyPair for files that may be swapped under
// a running gateway: each must be a regular file of at most a megabyte,
// and is read without waiting on anyone. A named pipe put in a
// certificate's place would otherwise hold the read until some writer
// came: at start, at a reload's validation, and on the handshake that
// looks at the files again.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := readPEM(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := readPEM(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// readPEM reads a certificate or key file as LoadKeyPair says.
func readPEM(name string) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe for reading does not wait for a
	// writer; the Stat below refuses it. A regular file ignores the flag.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "open", Path: name, Err: errNotPEMFile}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEMFile {
		return nil, &os.PathError{Op: "read", Path: name, Err: fmt.Errorf("over %d bytes: not a certificate or key", maxPEMFile)}
	}
	return b, nil
}
