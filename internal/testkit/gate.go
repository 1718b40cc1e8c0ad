package testkit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Gate is a named pipe (FIFO) that holds a fake back until the test opens
// it: the fake blocks reading the pipe ([FakeOptions.StartGate],
// [ChaosOptions.PingBurstGate]) until a writer has opened and closed it. It
// lets a test catch a server at a chosen point (still "downloading", halfway
// through a burst) and act there, without a sleep.
type Gate struct {
	// Path is the pipe's path, to put in the fake's options.
	Path string
}

// NewGate makes a gate in the test's temporary directory.
func NewGate(t testing.TB) Gate {
	t.Helper()
	g := Gate{Path: filepath.Join(t.TempDir(), "gate")}
	if err := syscall.Mkfifo(g.Path, 0o600); err != nil {
		t.Fatal(err)
	}
	return g
}

// Open lets the fake go on. Opening the pipe for writing waits for the fake
// to reach it; closing it ends the fake's read.
func (g Gate) Open(t testing.TB) {
	t.Helper()
	w, err := os.OpenFile(g.Path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
