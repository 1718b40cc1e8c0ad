package mux

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// delayedLevels makes up answer every logging/setLevel after a random
// delay (up to max), from another goroutine, as a server handling
// requests concurrently would: answers may come in any order. The returned
// wait waits for the answers still to come.
func delayedLevels(m *Mux, up *fakeUp, max time.Duration, seed uint64) (wait func()) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed))
	up.answer("logging/setLevel", nil)
	up.mu.Lock()
	up.hook = func(msg *jsonrpc.Message) {
		if !msg.MethodIs("logging/setLevel") {
			return
		}
		mu.Lock()
		d := time.Duration(rng.Int64N(int64(max)))
		mu.Unlock()
		id := string(msg.Bytes(msg.ID))
		gen := up.gen.Load()
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(d)
			m.Line(gen, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`))
		}()
	}
	up.mu.Unlock()
	return wg.Wait
}

// settledLevel waits until no level change runs and reports the server's
// level and the level the live sessions want.
func settledLevel(t *testing.T, m *Mux) (level, want int) {
	t.Helper()
	testkit.WaitFor(t, "the server's level to be the one the live sessions want", func() bool {
		select {
		case m.levelSem <- struct{}{}:
		default:
			return false
		}
		defer m.unlockLevel()
		m.mu.Lock()
		defer m.mu.Unlock()
		level, want = m.level, m.wantLevelLocked()
		return level == want
	})
	return level, want
}

// TestLevelStormSessionsComeAndGo: sessions setting levels while others
// leave mid-change (closed, or their request dropped), against a server
// answering late and out of order, leave the server at exactly the level
// the sessions still there want, its last setLevel written being that
// level, and the leveled count true.
func TestLevelStormSessionsComeAndGo(t *testing.T) {
	for seed := range uint64(3) {
		m, up := startShared(t, Options{Timeout: 5 * time.Second})
		wait := delayedLevels(m, up, 3*time.Millisecond, seed)
		var wg sync.WaitGroup
		var keptMu sync.Mutex
		var kept []*Client
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(w)))
				for range 25 {
					out := newRec()
					c := m.Join(out)
					ctx, drop := context.WithCancel(context.Background())
					done := make(chan struct{})
					lvl := levels[rng.IntN(len(levels))]
					go func() {
						defer close(done)
						c.Handle(ctx, request(t, "1", "logging/setLevel", `{"level":"`+lvl+`"}`), out)
					}()
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					switch rng.IntN(3) { // the requester leaves mid-change, or not
					case 0:
						c.Close()
					case 1:
						drop()
					}
					<-done
					drop()
					if rng.IntN(2) == 0 {
						c.Close()
					} else {
						keptMu.Lock()
						kept = append(kept, c)
						keptMu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		level, want := settledLevel(t, m)
		up.mu.Lock()
		w := up.writtenLocked("logging/setLevel")
		up.mu.Unlock()
		if want >= 0 && len(w) > 0 {
			last := string(w[len(w)-1].Raw)
			if !containsLevel(last, levels[want]) {
				t.Errorf("seed %d: last setLevel written %s, want level %s (server %d)", seed, last, levels[want], level)
			}
		}
		m.mu.Lock()
		walked := 0
		for c := range m.clients {
			if c.level >= 0 {
				walked++
			}
		}
		if m.leveled != walked {
			t.Errorf("seed %d: leveled %d, clients with a level %d", seed, m.leveled, walked)
		}
		m.mu.Unlock()
		for _, c := range kept {
			c.Close()
		}
		settledLevel(t, m)
		m.Close()
		wait()
	}
}

func containsLevel(raw, level string) bool {
	var p struct {
		Params struct {
			Level string `json:"level"`
		} `json:"params"`
	}
	return json.Unmarshal([]byte(raw), &p) == nil && p.Params.Level == level
}

// TestLevelNeverAnsweredRequesterLeavesMuxCloses: a setLevel the server
// never answers, whose requester left, holds the level lock in the
// background; the Mux's Close ends it at once (Close waits for it), with a
// timeout far away.
func TestLevelNeverAnsweredRequesterLeavesMuxCloses(t *testing.T) {
	for _, how := range []string{"closed", "dropped"} {
		m, up := startShared(t, Options{Timeout: time.Hour})
		up.answer("logging/setLevel", nil)
		c := m.Join(newRec())
		out := newRec()
		ctx, drop := context.WithCancel(context.Background())
		go c.Handle(ctx, request(t, "1", "logging/setLevel", `{"level":"debug"}`), out)
		up.waitFor(t, "setLevel written", func() bool { return len(up.writtenLocked("logging/setLevel")) == 1 })
		if how == "closed" {
			c.Close()
		} else {
			drop()
		}
		out.waitReplies(t, 1)
		// Another session's change waits behind it, bounded by its own ctx.
		other := m.Join(newRec())
		octx, ocancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		oout := newRec()
		start := time.Now()
		other.Handle(octx, request(t, "2", "logging/setLevel", `{"level":"info"}`), oout)
		oout.waitReplies(t, 1)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: another session's setLevel answered after %v", how, d)
		}
		ocancel()
		closed := make(chan struct{})
		go func() { m.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Mux.Close hangs behind a departed setLevel", how)
		}
		drop()
	}
}
