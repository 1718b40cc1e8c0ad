package testkit

import (
	"context"

	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Sender is the part of an upstream.Upstream that an in-memory fake of a
// server writes itself: where its messages go.
type Sender interface {
	Send(ctx context.Context, msg []byte) error
	TrySend(msg []byte) error
}

// Genless returns s as an upstream.Upstream without generations, process
// or supervisor, for the multiplexer's tests: SendGen and TrySendGen send
// to s whatever the generation, Restart and Served do nothing, CanRestart
// is false (the multiplexer retries a failed initialize itself, as with a
// remote upstream) and PID is 0. A fake that does more (counts restarts,
// refuses a stale generation) implements upstream.Upstream itself.
func Genless(s Sender) upstream.Upstream { return genless{s} }

type genless struct{ Sender }

func (g genless) SendGen(ctx context.Context, _ uint64, msg []byte) error { return g.Send(ctx, msg) }
func (g genless) TrySendGen(_ uint64, msg []byte) error                   { return g.TrySend(msg) }
func (genless) Restart(uint64, string)                                    {}
func (genless) CanRestart() bool                                          { return false }
func (genless) Served(uint64)                                             {}
func (genless) PID() int                                                  { return 0 }
