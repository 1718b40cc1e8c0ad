package stdio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// poolMsg is message i of sender g, padded to sizes that spread over the
// pooled buffer classes (4 KiB to 32 KiB) and unique byte for byte.
func poolMsg(g, i int) string {
	pad := (g*7919 + i*4099) % 30000
	return fmt.Sprintf(`{"g":%d,"i":%d,"pad":"%s"}`, g, i, strings.Repeat(string(rune('a'+(g+i)%26)), pad))
}

func parsePoolMsg(line string) (g, i int, ok bool) {
	if _, err := fmt.Sscanf(line, `{"g":%d,"i":%d`, &g, &i); err != nil {
		return 0, 0, false
	}
	return g, i, line == poolMsg(g, i)
}

// Every way a queued message's pooled buffer goes back before it is
// written, at once, and then the next process: senders fill the queue of
// a child that reads slowly, some with Sends whose context ends while
// they wait for room, some with TrySends refused on a full queue; then
// the child is killed with the queue full, so its writer drops what is
// queued. Each of those buffers is given back to the pool. The next
// process must get every message sent to it whole, once and in each
// sender's order, and the first one only whole messages, none twice (the
// same of the first senders' late messages that reach the second): a
// buffer given back while it was still queued (or twice) would be lent
// to another Send and written with that Send's bytes.
func TestGivenBackBuffersNeverWritten(t *testing.T) {
	cfg := shConfig(t, slowEchoScript)
	cfg.StuckTimeout = 10 * time.Second // slow is not stuck
	cfg.Restart = true
	s, r := start(t, cfg)
	r.waitEvent("started", 1)

	const senders, each = 8, 200 // more than the pipe and the queue hold
	var wg sync.WaitGroup
	outcomes := make(chan error, senders*each)
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				msg := []byte(poolMsg(g, i))
				var err error
				switch g % 3 {
				case 0:
					err = s.TrySend(msg)
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					err = s.Send(ctx, msg)
					cancel()
				default:
					err = s.Send(context.Background(), msg)
				}
				outcomes <- err
				if errors.Is(err, ErrNotRunning) {
					return // killed: what it sends on would flood the next one
				}
			}
		})
	}
	// Once the queue has been full, kill the child with it full: the
	// blocked Sends return ErrNotRunning, the queued buffers are dropped.
	// (A sender that raced ahead may still reach the next process.)
	r.waitFor("the queue to fill", func([]event) bool { return s.Stats().QueueFull > 0 })
	s.Restart(1, "attack: killed with its queue full")
	wg.Wait()
	close(outcomes)
	counts := map[string]int{}
	for err := range outcomes {
		switch {
		case err == nil:
			counts["queued"]++
		case errors.Is(err, ErrQueueFull):
			counts["full"]++
		case errors.Is(err, context.DeadlineExceeded):
			counts["deadline"]++
		case errors.Is(err, ErrNotRunning):
			counts["not running"]++
		default:
			t.Fatalf("Send: %v", err)
		}
	}
	r.waitEvent("exited", 1)
	r.waitEvent("started", 2)

	const next, nextEach = 100, 10
	var wg2 sync.WaitGroup
	for g := next; g < next+4; g++ {
		wg2.Go(func() {
			for i := range nextEach {
				if err := s.Send(context.Background(), []byte(poolMsg(g, i))); err != nil {
					t.Errorf("gen 2: sender %d message %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg2.Wait()
	evs := r.waitFor("generation 2 to echo every message", func(evs []event) bool {
		n := 0
		for _, e := range evs {
			if g, _, ok := parsePoolMsg(e.data); ok && e.kind == "line" && e.gen == 2 && g >= next {
				n++
			}
		}
		return n >= 4*nextEach
	})
	seen := map[[3]int]bool{}
	order := map[int]int{}
	for _, e := range evs {
		if e.kind != "line" {
			continue
		}
		g, i, ok := parsePoolMsg(e.data)
		if !ok {
			t.Fatalf("gen %d: a line that is not one whole message: %q", e.gen, abbrev(e.data))
		}
		k := [3]int{int(e.gen), g, i}
		if seen[k] {
			t.Fatalf("gen %d: sender %d message %d written twice", e.gen, g, i)
		}
		seen[k] = true
		// The first senders may still run when generation 2 starts: their
		// late messages reach it, whole; the order is the later senders'.
		if e.gen == 2 && g >= next {
			if i != order[g] {
				t.Fatalf("gen 2: sender %d message %d where %d was due", g, i, order[g])
			}
			order[g]++
		}
	}
	for g := next; g < next+4; g++ {
		if order[g] != nextEach {
			t.Errorf("gen 2: sender %d: %d messages, want %d", g, order[g], nextEach)
		}
	}
	t.Logf("generation 1: %v; stats %+v", counts, s.Stats())
}
