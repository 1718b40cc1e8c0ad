package mux

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// TestStaleInitDoesNotRestoreState: a generation that exits (and is
// replaced) between its initialize reply and becoming ready does not go on
// to restore subscriptions and the level on its successor: the successor
// restores them itself, once.
func TestStaleInitDoesNotRestoreState(t *testing.T) {
	gone := &signalHandler{msg: "process generation gone before it was ready", ch: make(chan struct{}, 1)}
	m, up := startShared(t, Options{Logger: slog.New(gone)})
	up.answer("resources/subscribe", result(`{}`))
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, "1", "resources/subscribe", `{"uri":"file:///a"}`), out)
	out.waitReplies(t, 1)

	var once sync.Once
	replaced := make(chan struct{})
	up.mu.Lock()
	up.hook = func(msg *jsonrpc.Message) {
		if !msg.MethodIs("notifications/initialized") || up.gen.Load() != 2 {
			return
		}
		// Generation 2 was just initialized on its own goroutine; while
		// its initialized notification is written, it exits and 3 starts.
		once.Do(func() {
			up.gen.Store(3)
			m.Exited(2, errors.New("exit status 1"))
			m.Started(3)
			waitPhase(t, m, Ready)
			writtenID(t, up, "resources/subscribe", 1) // 3 restored it
			close(replaced)
		})
	}
	up.mu.Unlock()
	m.Exited(1, errors.New("exit status 1"))
	up.gen.Store(2)
	m.Started(2)
	<-replaced
	select { // generation 2's init goroutine saw it was replaced
	case <-gone.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced generation's init went on")
	}
	m.Close() // waits for generation 2's init goroutine
	if n := numWritten(up, "resources/subscribe"); n != 2 {
		t.Fatalf("%d subscribes written, want 2 (the client's, and generation 3's restore)", n)
	}
}

// signalHandler is a slog handler that signals each record with message msg.
type signalHandler struct {
	msg string
	ch  chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }
