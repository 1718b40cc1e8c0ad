//go:build unix

package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A named pipe named as the certificate (or put in its place before a
// reload's validation) is a problem at its key at once: the file was read
// with os.ReadFile, which waited for a writer of the pipe, forever if none
// came, so validate, Start and a reload hung. A file too big to be a
// certificate is a problem too, not a megabyte read after another.
func TestTLSFileThatWouldHang(t *testing.T) {
	dir := t.TempDir()
	cert, key := testkit.WriteCert(t, dir, "a", "127.0.0.1")
	pipe := filepath.Join(dir, "pipe.crt")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	big := filepath.Join(dir, "big.crt")
	if err := os.WriteFile(big, make([]byte, maxPEMFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, c := range []struct{ tls, want string }{
		{`{"certFile": ` + q(pipe) + `, "keyFile": ` + q(key) + `}`, `gateway.tls.certFile: cannot read "` + pipe + `": not a regular file`},
		{`{"certFile": ` + q(cert) + `, "keyFile": ` + q(pipe) + `}`, `gateway.tls.keyFile: cannot read "` + pipe + `": not a regular file`},
		{`{"certFile": ` + q(big) + `, "keyFile": ` + q(key) + `}`, `gateway.tls.certFile: cannot read "` + big + `": over 1048576 bytes`},
		{`{"certFile": ` + q(dir) + `, "keyFile": ` + q(key) + `}`, `gateway.tls.certFile: cannot read "` + dir + `": not a regular file`},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := Parse([]byte(`{"mcpServers": {"m": {"command": "m"}}, "gateway": {"tls": `+c.tls+`}}`), nil)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("tls %s: %v, want %q", c.tls, err, c.want)
			}
		case <-time.After(10 * time.Second): // a hang detector, no bound on the code
			t.Errorf("tls %s: validation hung", c.tls)
			freeReaders(pipe, done)
		}
	}
	if _, err := LoadKeyPair(cert, key); err != nil {
		t.Errorf("LoadKeyPair of a certificate and its key: %v", err)
	}
}

// freeReaders opens and closes pipe for writing, which ends a read of it
// waiting for a writer, until done (the pipe may be read more than once).
func freeReaders(pipe string, done <-chan error) {
	for {
		if w, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
