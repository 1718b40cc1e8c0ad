package testkit

import (
	"log/slog"
	"strings"
	"testing"
)

// LogWriter is an io.Writer that logs each write through T (without its
// trailing newline), so that what a component logs shows with the test that
// failed, and only then.
type LogWriter struct{ T testing.TB }

// Write logs p.
func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Logger returns a text logger writing records of level and above through
// t (see [LogWriter]).
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(LogWriter{t}, &slog.HandlerOptions{Level: level}))
}
