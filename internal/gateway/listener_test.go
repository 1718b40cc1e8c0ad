package gateway

import (
	"net"
	"testing"
	"time"
)

// TestLimitListener: at the limit Accept waits until a connection closes,
// and Close wakes it.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 2)
	defer ln.Close()
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	third := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			third <- c
		}
		close(third)
	}()
	select {
	case <-third:
		t.Fatal("a third connection was accepted with a limit of 2")
	case <-time.After(100 * time.Millisecond):
	}
	a.Close()
	a.Close() // a second Close must not free a second slot
	select {
	case c, ok := <-third:
		if !ok {
			t.Fatal("Accept failed after a slot freed")
		}
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waiting after a connection closed")
	}
	if n := len(ln.slots); n != 2 {
		t.Errorf("%d slots taken, want 2", n)
	}

	// At the limit again: Close wakes the waiting Accept.
	done := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		done <- err
	}()
	ln.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Accept after Close returned a connection")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake a waiting Accept")
	}
}
