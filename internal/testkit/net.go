package testkit

import (
	"net"
	"testing"
	"time"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") whose port was free
// a moment ago: for a peer that cannot report the port it picked, or as an
// address nothing listens on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitListening waits until addr accepts TCP connections, for peers that do
// not report readiness. exited, if not nil, is polled (without being
// drained) for the peer ending first: then the test fails at once with
// what exited says.
func WaitListening(t testing.TB, name, addr string, exited func() (bool, error)) {
	t.Helper()
	WaitFor(t, name+" to listen on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		if exited != nil {
			if gone, werr := exited(); gone {
				t.Fatalf("%s exited before listening on %s: %v", name, addr, werr)
			}
		}
		return false
	})
}
