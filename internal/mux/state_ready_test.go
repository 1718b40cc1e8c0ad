package mux

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// readyRecords is a slog.Handler passing on the "server ready" records.
type readyRecords chan slog.Record

func (h readyRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h readyRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h readyRecords) WithGroup(string) slog.Handler            { return h }
func (h readyRecords) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "server ready" {
		h <- r.Clone()
	}
	return nil
}

func (h readyRecords) next(t *testing.T) (slog.Level, map[string]slog.Value) {
	t.Helper()
	select {
	case r := <-h:
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
		return r.Level, attrs
	case <-time.After(10 * time.Second):
		t.Fatal("no server ready line")
		panic("unreachable")
	}
}

// A shared server logs "server ready" at info once its initialize is
// answered, with the time since its generation started, and again (with
// the restart count) for each later generation.
func TestReadyLogged(t *testing.T) {
	logs := make(readyRecords, 4)
	begin := time.Now()
	m, up := startShared(t, Options{Logger: slog.New(logs)})
	level, attrs := logs.next(t)
	if level != slog.LevelInfo || attrs["gen"].Uint64() != 1 || attrs["startup"].Duration() > time.Since(begin) {
		t.Errorf("first ready line at %v: %v", level, attrs)
	}
	if _, ok := attrs["restarts"]; ok {
		t.Errorf("first ready line with restarts: %v", attrs)
	}
	m.Exited(1, errors.New("exit status 1"))
	up.gen.Store(2)
	m.Started(2)
	level, attrs = logs.next(t)
	if level != slog.LevelInfo || attrs["gen"].Uint64() != 2 || attrs["restarts"].Uint64() != 1 {
		t.Errorf("ready line after a restart at %v: %v", level, attrs)
	}
}

// An exclusive Mux's generations are one session's processes: their ready
// lines are debug, the session's own open line being the info one.
func TestReadyExclusiveIsDebug(t *testing.T) {
	logs := make(readyRecords, 4)
	m := New(Options{Name: "t", Exclusive: true, Logger: slog.New(logs)})
	t.Cleanup(m.Close)
	up := newFakeUp(m)
	m.SetUpstream(up)
	m.Started(1) // ready at once, unlogged: no initialize of the gateway's
	waitPhase(t, m, Ready)
	// A restart replays the client's initialize: that one is logged.
	c := m.Join(newRec())
	m.mu.Lock()
	c.init = []byte(`{"protocolVersion":"2025-11-25","capabilities":{}}`)
	m.mu.Unlock()
	m.Exited(1, nil)
	up.gen.Store(2)
	m.Started(2)
	if level, attrs := logs.next(t); level != slog.LevelDebug || attrs["gen"].Uint64() != 2 || attrs["restarts"].Uint64() != 1 {
		t.Errorf("ready line at %v: %v", level, attrs)
	}
}
