package mux

import (
	"context"
	"log/slog"
	"testing"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file holds tests of what a hostile or broken server may send.

// TestInitializeResultNotAnObject: a server whose initialize result is not a
// JSON object (null passes a struct decode) fails its initialize (and is
// retried) instead of taking every client's initialize down with it.
func TestInitializeResultNotAnObject(t *testing.T) {
	for _, body := range []string{`null`, `[]`, `"x"`, `1`} {
		t.Run(body, func(t *testing.T) {
			m := New(Options{Name: "t", Logger: slog.New(slog.DiscardHandler)})
			t.Cleanup(m.Close)
			up := newFakeUp(m)
			up.answer("initialize", result(body))
			m.SetUpstream(up)
			m.Started(1)
			st := waitPhase(t, m, BackingOff)
			if st.Reason == nil {
				t.Fatal("no reason for the failed initialize")
			}
			out := newRec()
			c := m.Join(out)
			c.Handle(context.Background(), request(t, `1`, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{}}`), out)
			if code, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); !isErr || code != protocol.CodeServerError {
				t.Fatalf("client initialize answered %s, want an error", out.waitReplies(t, 1)[0])
			}
		})
	}
}
