package mux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file races everything that may answer a request (the server's
// reply, the timeout, the client's cancellation, Client.Close, the
// process's exit, Mux.Close, the writers of released requests) and checks
// that every request is answered exactly once.

// onceStream is a request's Stream that counts its replies.
type onceStream struct {
	t       *testing.T
	replies atomic.Int32
}

func (s *onceStream) Send([]byte) {}
func (s *onceStream) Reply(msg []byte) {
	if s.replies.Add(1) > 1 {
		s.t.Errorf("second reply %s", msg)
	}
}

// chaosUp is an upstream whose queue is full at random, whose Send blocks
// at random (until its ctx ends or a short while passed), and which
// remembers the ids of requests for a replier to answer.
type chaosUp struct {
	mu  sync.Mutex
	ids [][]byte
	gen atomic.Uint64
}

func (u *chaosUp) Send(ctx context.Context, msg []byte) error {
	if rand.IntN(4) == 0 {
		t := time.NewTimer(time.Duration(rand.IntN(3)) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return u.take(msg)
}

func (u *chaosUp) TrySend(msg []byte) error {
	if rand.IntN(3) == 0 {
		return errFakeQueueFull
	}
	return u.take(msg)
}

func (u *chaosUp) take(msg []byte) error {
	req, err := jsonrpc.Parse(msg)
	if err != nil || req.Kind != jsonrpc.KindRequest {
		return err
	}
	u.mu.Lock()
	u.ids = append(u.ids, append([]byte(nil), req.Bytes(req.ID)...))
	u.mu.Unlock()
	return nil
}

// next returns the id of a request to answer (any, in any order), or nil.
func (u *chaosUp) next() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.ids) == 0 {
		return nil
	}
	i := rand.IntN(len(u.ids))
	id := u.ids[i]
	u.ids = append(u.ids[:i], u.ids[i+1:]...)
	return id
}

// The chaos server restarts only when the test says (Exited, Started):
// Restart is accepted and does nothing, and generations are not checked.
func (u *chaosUp) Restart(uint64, string) {}
func (u *chaosUp) CanRestart() bool       { return true }
func (u *chaosUp) Served(uint64)          {}
func (u *chaosUp) PID() int               { return 0 }
func (u *chaosUp) SendGen(ctx context.Context, _ uint64, msg []byte) error {
	return u.Send(ctx, msg)
}
func (u *chaosUp) TrySendGen(_ uint64, msg []byte) error { return u.TrySend(msg) }

// TestEveryRequestAnsweredOnce hammers a shared Mux with sessions sending,
// cancelling and closing while the server answers, stalls, exits and
// restarts, then closes it: every request got exactly one reply, and
// every Handle returned.
func TestEveryRequestAnsweredOnce(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			m := New(Options{Name: "chaos", Timeout: 20 * time.Millisecond, InitTimeout: time.Second,
				MaxInFlight: 3, Logger: slog.New(slog.DiscardHandler)})
			up := &chaosUp{}
			up.gen.Store(1)
			m.SetUpstream(up)
			m.Started(1)

			stop := make(chan struct{})
			var server sync.WaitGroup
			server.Add(1)
			go func() { // the server: answers, crashes, restarts
				defer server.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					gen := up.gen.Load()
					if id := up.next(); id != nil {
						m.Line(gen, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`, id))
					}
					if rand.IntN(300) == 0 {
						m.Exited(gen, errors.New("exit status 1"))
						up.gen.Store(gen + 1)
						m.Waiting(errors.New("exit status 1"), time.Millisecond)
						m.Started(gen + 1)
					}
					time.Sleep(50 * time.Microsecond)
				}
			}()

			var streams []*onceStream
			var smu sync.Mutex
			var clients sync.WaitGroup
			for s := range 8 {
				clients.Add(1)
				go func() {
					defer clients.Done()
					c := m.Join(&onceStream{t: t})
					for i := range 60 {
						out := &onceStream{t: t}
						smu.Lock()
						streams = append(streams, out)
						smu.Unlock()
						id := fmt.Sprintf(`"%d-%d"`, s, i)
						req := request(t, id, "tools/call", `{}`)
						clients.Add(1)
						go func(c *Client) { // requests of a session run concurrently
							defer clients.Done()
							c.Handle(context.Background(), req, out)
						}(c)
						if rand.IntN(2) == 0 {
							time.Sleep(100 * time.Microsecond)
						}
						switch rand.IntN(10) {
						case 0:
							c.Handle(context.Background(), notification(t, "notifications/cancelled", `{"requestId":`+id+`}`), nil)
						case 1:
							c.Close()
							c = m.Join(&onceStream{t: t})
						}
					}
					c.Close()
				}()
			}
			if round == 2 {
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				m.Close() // while sessions are still at it
			}
			clients.Wait()
			close(stop)
			server.Wait()
			m.Close()
			for i, s := range streams {
				if n := s.replies.Load(); n != 1 {
					t.Errorf("request %d got %d replies", i, n)
				}
			}
		})
	}
}
