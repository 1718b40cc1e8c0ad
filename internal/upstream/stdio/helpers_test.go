package stdio

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main()
	goleak.VerifyTestMain(m)
}

// failAfter bounds every wait; no test passes by waiting it out.
const failAfter = 15 * time.Second

type event struct {
	kind string // "started", "line", "oversized", "exited", "waiting"
	gen  uint64
	data string // line, or oversized prefix
	size int
	err  error
	wait time.Duration // Waiting's d
}

// recorder is a Handler that records every call and lets tests wait for a
// condition on the record.
type recorder struct {
	mu     sync.Mutex
	events []event // guarded by mu
	wake   chan struct{}
	active atomic.Int32 // Handler methods running now; more than 1 is a bug
	t      *testing.T
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{wake: make(chan struct{}, 1), t: t}
}

func (r *recorder) add(e event) {
	if r.active.Add(1) != 1 {
		r.t.Errorf("Handler methods overlap")
	}
	defer r.active.Add(-1)
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *recorder) Started(gen uint64) { r.add(event{kind: "started", gen: gen}) }
func (r *recorder) Line(gen uint64, line []byte) {
	r.add(event{kind: "line", gen: gen, data: string(line), size: len(line)})
}
func (r *recorder) Oversized(gen uint64, prefix []byte, size int) {
	r.add(event{kind: "oversized", gen: gen, data: string(prefix), size: size})
}
func (r *recorder) Exited(gen uint64, err error) { r.add(event{kind: "exited", gen: gen, err: err}) }
func (r *recorder) Waiting(err error, d time.Duration) {
	r.add(event{kind: "waiting", err: err, wait: d})
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitFor blocks until cond holds for the recorded events, or fails the test
// after failAfter.
func (r *recorder) waitFor(what string, cond func([]event) bool) []event {
	r.t.Helper()
	deadline := time.NewTimer(failAfter)
	defer deadline.Stop()
	for {
		evs := r.snapshot()
		if cond(evs) {
			return evs
		}
		select {
		case <-r.wake:
		case <-deadline.C:
			r.t.Fatalf("timed out waiting for %s; events: %s", what, summarize(evs))
		}
	}
}

// waitEvent waits for an event of kind in generation gen and returns it.
func (r *recorder) waitEvent(kind string, gen uint64) event {
	r.t.Helper()
	var found event
	r.waitFor(fmt.Sprintf("%s(gen %d)", kind, gen), func(evs []event) bool {
		for _, e := range evs {
			if e.kind == kind && e.gen == gen {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// waitLine waits for a line equal to want.
func (r *recorder) waitLine(want string) event {
	r.t.Helper()
	var found event
	r.waitFor("line "+abbrev(want), func(evs []event) bool {
		for _, e := range evs {
			if e.kind == "line" && e.data == want {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

func summarize(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s gen=%d size=%d data=%q err=%v", e.kind, e.gen, e.size, abbrev(e.data), e.err)
	}
	return b.String()
}

func abbrev(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// testLogger logs through t, so failures show the Stdio's view.
func testLogger(t *testing.T) *slog.Logger { return testkit.Logger(t, slog.LevelDebug) }

// fakeConfig returns a StdioConfig that runs the test binary as a fake.
func fakeConfig(t *testing.T, opts testkit.FakeOptions) StdioConfig {
	name, args, env := testkit.Command(opts)
	return StdioConfig{
		Name:       t.Name(),
		Command:    name,
		Args:       args,
		Env:        append(os.Environ(), env...),
		Logger:     testLogger(t),
		StopGrace:  time.Second,
		MinBackoff: 5 * time.Millisecond,
		MaxBackoff: 20 * time.Millisecond,
	}
}

// start starts a Stdio and closes it when the test ends.
func start(t *testing.T, cfg StdioConfig) (*Stdio, *recorder) {
	t.Helper()
	r := newRecorder(t)
	s, err := StartStdio(cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, r
}

func marker(t *testing.T) string {
	return fmt.Sprintf("mk-%d-%d-%s", os.Getpid(), time.Now().UnixNano(), strings.ReplaceAll(t.Name(), "/", "_"))
}

// discardLogger drops everything: for tests whose children log floods.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
