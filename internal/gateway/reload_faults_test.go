package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/mcptest"
)

// startServing is startReloading, returning once serve logged its start
// (under the reload lock): a reload made after it is ordered after serve's
// unlocked read of the config at its start (see
// TestReloadFaultsRightAfterStart, which shows that race).
func startServing(t *testing.T, cfg *config.Config, opts ReloadOptions) (*testGateway, *logBuffer) {
	t.Helper()
	g, logs := startReloading(t, cfg, opts)
	waitFor(t, "the gateway serving", func() bool { return len(logs.lines(`msg=listening`)) > 0 })
	return g, logs
}

// TestReloadFaultsRightAfterStart: a reload that comes as the gateway
// starts serving (a SIGHUP queued during start, or a file change, which
// watchLoop handles as soon as it runs: it is started before serve) races
// serve's read of g.cfg.Gateway at its start (gateway.go, serve, first
// line), which takes neither reloader.mu nor reloader.state.
//
// FAILING DEMONSTRATION under -race (usually; the detector needs both
// accesses to happen close together): "DATA RACE ... (*Gateway).serve()
// gateway.go:191 ... previous write ... (*Gateway).apply() reload.go".
func TestReloadFaultsRightAfterStart(t *testing.T) {
	cfg := newConfig(fakeServer("a", mcptest.FakeOptions{}))
	for range 12 {
		g, _ := startReloading(t, cfg, ReloadOptions{})
		if err := g.gw.Reload(cloneConfig(cfg)); err != nil {
			t.Fatal(err)
		}
		if err := g.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// hookHandler is a slog.Handler that passes records on to next and calls
// hook (once armed) for each record, before passing it on.
type hookHandler struct {
	next      slog.Handler
	hook      *func(slog.Record)
	mu        *sync.Mutex
	listening *sync.Once
	served    chan struct{} // closed on serve's "listening" line
}

func (h hookHandler) Enabled(ctx context.Context, l slog.Level) bool { return true }
func (h hookHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "listening" {
		h.listening.Do(func() { close(h.served) })
	}
	h.mu.Lock()
	f := *h.hook
	h.mu.Unlock()
	if f != nil {
		f(r)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}
func (h hookHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.next = h.next.WithAttrs(as)
	return h
}
func (h hookHandler) WithGroup(n string) slog.Handler {
	h.next = h.next.WithGroup(n)
	return h
}

func recordAttr(r slog.Record, key string) string {
	v := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// blockingAuth lets every request through as nobody; one carrying the
// header X-Block waits for release first (entered is closed when it does).
type blockingAuth struct {
	entered, release chan struct{}
	once             sync.Once
}

func (a *blockingAuth) Authenticate(r *http.Request, t auth.Target) auth.Decision {
	if r.Header.Get("X-Block") != "" {
		a.once.Do(func() { close(a.entered) })
		select {
		case <-a.release:
		case <-time.After(30 * time.Second):
		}
	}
	return auth.Decision{}
}

func (a *blockingAuth) Metadata(auth.Target) ([]byte, bool) { return nil, false }

// startHooked runs cfg with authenticator a and a logger whose records
// go through hook (set it with setHook).
func startHooked(t *testing.T, cfg *config.Config, a auth.Authenticator) (*testGateway, func(func(slog.Record))) {
	t.Helper()
	var hook func(slog.Record)
	var mu sync.Mutex
	served := make(chan struct{})
	log := slog.New(hookHandler{next: slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}), hook: &hook, mu: &mu,
		listening: &sync.Once{}, served: served})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := start(cfg, log, a)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.serve(ctx, ln) }()
	tr := &http.Transport{}
	var once sync.Once
	var stopErr error
	g := &testGateway{URL: "http://" + ln.Addr().String(), http: &http.Client{Transport: tr}, gw: gw}
	g.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = fmt.Errorf("gateway did not stop within 30s")
			}
			tr.CloseIdleConnections()
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Errorf("gateway stop: %v", err)
		}
	})
	select {
	case <-served:
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not start serving")
	}
	return g, func(f func(slog.Record)) { mu.Lock(); hook = f; mu.Unlock() }
}

// TestReloadFaultsSessionOpenedOnReplacedBackend: a request that passed
// its front checks on the old snapshot (here: its authentication took a
// while, as an introspection would) and opens its session after the
// reload's CloseTarget ran, but before the old backend is closed, ends up
// with a session on the old backend, which the reload then stops. The
// file comment of reload.go promises "never ... a session left on a
// stopped backend": its client should get 404 (and initialize again on
// the new server) rather than keep a session whose server is gone.
//
// FAILING DEMONSTRATION (see the report).
func TestReloadFaultsSessionOpenedOnReplacedBackend(t *testing.T) {
	stamp := time.Now().UnixNano()
	oldMark, newMark := fmt.Sprintf("rlf-old-%d", stamp), fmt.Sprintf("rlf-new-%d", stamp)
	cfg := newConfig(fakeServer("a", mcptest.FakeOptions{Marker: oldMark}))
	ba := &blockingAuth{entered: make(chan struct{}), release: make(chan struct{})}
	g, setHook := startHooked(t, cfg, ba)

	first := g.client("a")
	first.connect(t) // the session whose end the hook waits on

	// A second client's initialize, held in its authentication.
	late := g.client("a")
	late.header.Set("X-Block", "1")
	type initResult struct {
		status  int
		session string
		err     error
	}
	initDone := make(chan initResult, 1)
	go func() {
		req := late.request(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		resp, err := g.http.Do(req)
		if err != nil {
			initDone <- initResult{err: err}
			return
		}
		resp.Body.Close()
		initDone <- initResult{status: resp.StatusCode, session: resp.Header.Get("Mcp-Session-Id")}
	}()
	select {
	case <-ba.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the late initialize never reached authentication")
	}

	// When the reload ends the first session (CloseTarget ran: the store
	// holds no more session of "a"), let the late initialize go on and
	// wait for its answer before the old backend is closed.
	var res initResult
	var gotRes bool
	var once sync.Once
	setHook(func(r slog.Record) {
		if r.Message != "session closed" || recordAttr(r, "reason") != reasonServerChanged {
			return
		}
		once.Do(func() {
			close(ba.release)
			select {
			case res = <-initDone:
				gotRes = true
			case <-time.After(20 * time.Second):
			}
		})
	})
	next := cloneConfig(cfg)
	next.Servers["a"] = fakeServer("a", mcptest.FakeOptions{Marker: newMark})
	next.Gateway.Auth = nil
	if err := g.gw.Reload(next); err != nil {
		t.Fatalf("reload: %v", err)
	}
	setHook(nil)
	if !gotRes {
		t.Fatal("the late initialize got no answer while the reload held the old backend")
	}
	if res.err != nil {
		t.Fatalf("late initialize: %v", res.err)
	}
	if left := mcptest.WaitProcsGone(oldMark, 10*time.Second); len(left) != 0 {
		t.Fatalf("the old server's processes still run: %+v", left)
	}
	t.Logf("late initialize: status %d, session %q", res.status, logID(res.session))
	if res.status != http.StatusOK {
		return // refused: nothing was left behind
	}
	late.session = res.session
	late.header.Del("X-Block")
	n := late.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r := late.post(t, callBody("2", "echo", map[string]string{"message": "x"}, ""))
	t.Logf("after the reload: initialized %d; echo status %d body %s msgs %s", n.Status, r.Status, r.Body, r.Msgs)
	for _, s := range g.gw.Handler.SessionList(time.Now()) {
		if strings.HasPrefix(res.session, s.IDPrefix) {
			t.Errorf("session %s opened on the replaced backend is still live (target %s) after the reload stopped that backend", s.IDPrefix, s.Target)
		}
	}
	if r.Status != http.StatusNotFound {
		t.Errorf("echo on a session opened on the replaced backend: status %d, want 404 (initialize again on the new server)", r.Status)
	}
}

func logID(id string) string { return id[:min(8, len(id))] }

// TestReloadFaultsRemovedKeyKeepsNoSession: a reload that removes an API
// key: the sessions that key opened are not ended, but every request on
// them is refused (each request authenticates against the current keys),
// so the session is unusable and lingers until the idle timeout.
func TestReloadFaultsRemovedKeyKeepsNoSession(t *testing.T) {
	key := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	const oldKey, otherKey = "old-0123456789abcdef", "other-0123456789abcdef"
	cfg := newConfig(fakeServer("a", mcptest.FakeOptions{}))
	cfg.Gateway.Auth = config.NewAuth()
	cfg.Gateway.Auth.APIKeys = []config.APIKey{{Name: "old", SHA256: key(oldKey)}, {Name: "other", SHA256: key(otherKey)}}
	g, _ := startServing(t, cfg, ReloadOptions{})
	c := g.client("a")
	c.header.Set("Authorization", "Bearer "+oldKey)
	c.connect(t)

	next := cloneConfig(cfg)
	a := *cfg.Gateway.Auth
	a.APIKeys = []config.APIKey{{Name: "other", SHA256: key(otherKey)}}
	next.Gateway.Auth = &a
	if err := g.gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	r := c.post(t, callBody("3", "echo", map[string]string{"message": "x"}, ""))
	t.Logf("removed key, its existing session: status %d %s", r.Status, r.Body)
	if r.Status != http.StatusUnauthorized {
		t.Errorf("a request with a removed key on its old session: %d, want 401", r.Status)
	}
	// The session's owner is key:old: nobody else can use it either.
	o := g.client("a")
	o.header.Set("Authorization", "Bearer "+otherKey)
	o.session = c.session
	if r := o.post(t, callBody("4", "echo", map[string]string{"message": "x"}, "")); r.Status != http.StatusNotFound {
		t.Errorf("another key on the removed key's session: %d, want 404", r.Status)
	}
	var live []string
	for _, s := range g.gw.Handler.SessionList(time.Now()) {
		live = append(live, s.Principal)
	}
	t.Logf("live sessions after the key's removal: %v", live)
}

// TestReloadFaultsConcurrentReloadsUnderLoad: reloads from two sources at
// once (a trigger, as SIGHUP, and direct calls, as a file change would
// make), flipping one server's config while clients call an unchanged
// server and the flipped one: every call on the unchanged server succeeds
// on the same process; every call on the flipped one gets exactly one
// answer (a result, or an error naming the change, or 404); no process of
// an old generation is left.
func TestReloadFaultsConcurrentReloadsUnderLoad(t *testing.T) {
	stamp := time.Now().UnixNano()
	keepMark := fmt.Sprintf("rlc-keep-%d", stamp)
	flipPrefix := fmt.Sprintf("rlc-flip-%d-", stamp)
	flipMark := func(i int) string { return fmt.Sprintf("%s%d-x", flipPrefix, i) }
	cfg := newConfig(fakeServer("keep", mcptest.FakeOptions{Marker: keepMark}), fakeServer("flip", mcptest.FakeOptions{Marker: flipMark(0)}))
	var gen sync.Mutex
	n := 0
	nextCfg := func() *config.Config {
		gen.Lock()
		n++
		i := n
		gen.Unlock()
		c := cloneConfig(cfg)
		c.Servers["flip"] = fakeServer("flip", mcptest.FakeOptions{Marker: flipMark(i)})
		return c
	}
	trigger := make(chan os.Signal)
	var reloads sync.WaitGroup
	g, _ := startServing(t, cfg, ReloadOptions{
		Trigger: trigger, Load: func() (*config.Config, error) { return nextCfg(), nil },
		Reloaded: func(s ReloadSummary, err error) {
			if err != nil {
				t.Errorf("triggered reload: %v", err)
			}
			reloads.Done()
		},
	})
	keep := g.client("keep")
	keep.connect(t)
	keepPID := pidOf(t, keep)

	stop := make(chan struct{})
	var clients sync.WaitGroup
	var keepCalls, flipCalls, flipErrs, flip404 int
	var mu sync.Mutex
	for w := range 3 {
		clients.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				msg := fmt.Sprintf("k%d-%d", w, i)
				r := keep.post(t, callBody(fmt.Sprintf(`"%s"`, msg), "echo", map[string]string{"message": msg}, ""))
				if r.Status != http.StatusOK || len(r.Msgs) != 1 {
					t.Errorf("keep call %s: status %d, %d messages %s", msg, r.Status, len(r.Msgs), r.Body)
					return
				}
				if m := r.final(t); string(m.ID) != `"`+msg+`"` || m.Error != nil {
					t.Errorf("keep call %s: %s", msg, r.Msgs[0])
					return
				}
				mu.Lock()
				keepCalls++
				mu.Unlock()
			}
		})
		clients.Go(func() {
			var f *mcpClient
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if f == nil {
					f = g.client("flip")
					r := f.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
					f.session = r.Header.Get("Mcp-Session-Id")
					if r.Status != http.StatusOK || f.session == "" {
						f = nil
						continue // a 503, or an initialize error, while its server is replaced: try again
					}
				}
				r := f.post(t, callBody(fmt.Sprint(i+1), "echo", map[string]string{"message": "f"}, ""))
				mu.Lock()
				flipCalls++
				switch {
				case r.Status == http.StatusNotFound:
					flip404++
					f = nil
				case r.Status != http.StatusOK || len(r.Msgs) != 1:
					t.Errorf("flip call: status %d, %d messages %s", r.Status, len(r.Msgs), r.Body)
				case r.final(t).Error != nil:
					flipErrs++
					f = nil
				}
				mu.Unlock()
			}
		})
	}
	const rounds = 6
	for range rounds {
		reloads.Add(1)
		var direct sync.WaitGroup
		direct.Go(func() {
			if err := g.gw.Reload(nextCfg()); err != nil {
				t.Errorf("direct reload: %v", err)
			}
		})
		trigger <- syscall.SIGHUP
		direct.Wait()
	}
	reloads.Wait()
	close(stop)
	clients.Wait()
	t.Logf("keep calls %d; flip calls %d (errors %d, 404 %d)", keepCalls, flipCalls, flipErrs, flip404)
	if got := pidOf(t, keep); got != keepPID {
		t.Errorf("unchanged server's pid %s, was %s", got, keepPID)
	}
	// The generation applied last is the only one left.
	_, servers, _ := g.gw.current()
	_ = servers
	deadline := time.Now().Add(10 * time.Second)
	for len(mcptest.Procs(flipPrefix)) > 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling the process table
	}
	if got := mcptest.Procs(flipPrefix); len(got) != 1 {
		t.Errorf("%d processes of flip, want 1: %+v", len(got), got)
	}
	if got := len(mcptest.Procs(keepMark)); got != 1 {
		t.Errorf("%d processes of keep, want 1", got)
	}
}

// TestReloadFaultsRetargetedSymlink: the config file is a symlink; the
// operator points it at a new file (in another directory), which reloads;
// then edits the new target in place. The edit should reload as an edit
// of the first target did.
//
// FAILING DEMONSTRATION (see the report): watchLoop computes the names it
// follows (watchedNames) once, at start: after the symlink is retargeted,
// events on the new target are ignored, and watchDir added the old
// target's directory only, so the new one's is not even watched.
func TestReloadFaultsRetargetedSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	// The new target is in a directory of its own, as a release layout
	// (/srv/releases/N/mcpgate.json) has it.
	real2 := filepath.Join(dir, "real2")
	if err := os.Mkdir(real2, 0o700); err != nil {
		t.Fatal(err)
	}
	v1, v2 := filepath.Join(real, "v1.json"), filepath.Join(real2, "v2.json")
	if err := os.WriteFile(v1, configJSON(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcpgate.json")
	if err := os.Symlink(v1, path); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		sum ReloadSummary
		err error
	}
	reloaded := make(chan result, 8)
	startServing(t, cfg, ReloadOptions{
		Path: path, Watch: true, Debounce: 20 * time.Millisecond,
		Reloaded: func(s ReloadSummary, err error) { reloaded <- result{s, err} },
	})
	wait := func(what string, d time.Duration) (result, bool) {
		select {
		case r := <-reloaded:
			return r, true
		case <-time.After(d):
			return result{}, false
		}
	}
	// Retarget: v2 written, a new symlink renamed over the old one.
	if err := os.WriteFile(v2, configJSON(t, "a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".tmp-link")
	if err := os.Symlink(v2, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if r, ok := wait("retarget", 20*time.Second); !ok || r.err != nil || !slices.Equal(r.sum.Added, []string{"b"}) {
		t.Fatalf("after the retarget: %+v %v (reloaded %v)", r.sum, r.err, ok)
	}
	// Edit the new target in place.
	if err := os.WriteFile(v2, configJSON(t, "a", "b", "c"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, ok := wait("edit", 5*time.Second)
	if !ok {
		t.Fatal("editing the symlink's new target did not reload (its events are ignored: watchedNames is computed once)")
	}
	if r.err != nil || !slices.Equal(r.sum.Added, []string{"c"}) {
		t.Errorf("after the edit: %+v %v", r.sum, r.err)
	}
}

// TestReloadFaultsHalfWrittenAndNoise: a file written in two steps
// reloads once complete (a reload attempt of the half may be refused,
// never applied); many writes to other files of the directory reload
// nothing; a symlink loop as the config path is no crash.
func TestReloadFaultsHalfWrittenAndNoise(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpgate.json")
	if err := os.WriteFile(path, configJSON(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		sum ReloadSummary
		err error
	}
	reloaded := make(chan result, 64)
	g, _ := startServing(t, cfg, ReloadOptions{
		Path: path, Watch: true, Debounce: 20 * time.Millisecond,
		Reloaded: func(s ReloadSummary, err error) { reloaded <- result{s, err} },
	})
	full := configJSON(t, "a", "b")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(full[:len(full)/2]); err != nil {
		t.Fatal(err)
	}
	// Wait for the attempt on the half (refused), then finish.
	select {
	case r := <-reloaded:
		if r.err == nil {
			t.Fatalf("the half-written file was applied: %+v", r.sum)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload attempt on the half-written file")
	}
	if _, err := f.Write(full[len(full)/2:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	select {
	case r := <-reloaded:
		if r.err != nil || !slices.Equal(r.sum.Added, []string{"b"}) {
			t.Fatalf("the completed file: %+v %v", r.sum, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload once the file was complete")
	}
	// Noise: 500 writes to other files, then a marker reload through a
	// real change; nothing in between.
	for i := range 500 {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("noise-%d.log", i%7)), []byte(fmt.Sprint(i)), 0o600)
	}
	_ = os.WriteFile(filepath.Join(dir, ".mcpgate.json.swp"), []byte("x"), 0o600)
	if err := os.WriteFile(path, configJSON(t, "a", "b", "c"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-reloaded:
		if r.err != nil || !slices.Equal(r.sum.Added, []string{"c"}) {
			t.Fatalf("after the noise: %+v %v, want c added (and no reload for the noise)", r.sum, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload after the noise")
	}
	if len(reloaded) != 0 {
		t.Errorf("%d extra reloads", len(reloaded))
	}
	echoOK(t, func() *mcpClient { c := g.client("c"); c.connect(t); return c }(), "c")

	// A symlink loop as the config path.
	loop := filepath.Join(dir, "loop.json")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	if names := watchedNames(loop); len(names) != 1 {
		t.Errorf("watchedNames of a symlink loop: %v", names)
	}
	if w, err := watchDir(loop); err == nil {
		w.Close()
	}
	if h := hashFile(loop); h != nil {
		t.Errorf("hash of a symlink loop: %x", h)
	}
}

// TestReloadFaultsDuringShutdown: reloads racing the gateway's shutdown
// either apply before it or return ErrStopped; every process they started
// is stopped (no leak: goleak runs after the package's tests).
func TestReloadFaultsDuringShutdown(t *testing.T) {
	stamp := time.Now().UnixNano()
	prefix := fmt.Sprintf("rls-%d-", stamp)
	cfg := newConfig(fakeServer("a", mcptest.FakeOptions{Marker: prefix + "a-x"}))
	g, _ := startServing(t, cfg, ReloadOptions{})
	c := g.client("a")
	c.connect(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			next := cloneConfig(cfg)
			next.Servers[fmt.Sprint("n", i)] = fakeServer(fmt.Sprint("n", i), mcptest.FakeOptions{Marker: fmt.Sprintf("%sn%d-x", prefix, i)})
			if err := g.gw.Reload(next); err != nil && err != ErrStopped {
				t.Errorf("reload: %v", err)
			}
		})
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if left := mcptest.WaitProcsGone(prefix, 10*time.Second); len(left) != 0 {
		t.Errorf("processes left after a reload raced the shutdown: %+v", left)
	}
}

// TestReloadFaultsParkedRequest: a 2026-07-28 tools/call parked for the
// client's input (input_required) on a server that a reload changes or
// removes: the old process is stopped, and the retry with the requestState
// gets one bounded answer (an error or 404), never a hang, nor the new
// process's work under the old state.
func TestReloadFaultsParkedRequest(t *testing.T) {
	for _, mode := range []string{"changed", "removed"} {
		t.Run(mode, func(t *testing.T) {
			stamp := time.Now().UnixNano()
			oldMark := fmt.Sprintf("rlp-old-%d-x", stamp)
			cfg := newConfig(fakeServer("s", mcptest.FakeOptions{Marker: oldMark}), fakeServer("k", mcptest.FakeOptions{}))
			cfg.Gateway.InputWait = 30 * time.Second
			g, _ := startServing(t, cfg, ReloadOptions{})
			waitFor(t, "the server to be ready", func() bool { return g.gw.Readiness().Servers["s"].Ready })
			status, body, err := atkModern(g, 10*time.Second, "s", "1", "sample", `{"prompt":"p"}`, "")
			var r struct {
				Result struct {
					ResultType    string
					InputRequests map[string]json.RawMessage
					RequestState  string
				}
			}
			if err != nil || json.Unmarshal([]byte(body), &r) != nil || r.Result.ResultType != "input_required" {
				t.Fatalf("first: %d %v %s", status, err, body)
			}
			var key string
			for k := range r.Result.InputRequests {
				key = k
			}
			next := cloneConfig(cfg)
			if mode == "changed" {
				next.Servers["s"] = fakeServer("s", mcptest.FakeOptions{Marker: fmt.Sprintf("rlp-new-%d-x", stamp)})
			} else {
				delete(next.Servers, "s")
			}
			done := make(chan error, 1)
			go func() { done <- g.gw.Reload(next) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the reload did not end while a request was parked on the server")
			}
			if left := mcptest.WaitProcsGone(oldMark, 10*time.Second); len(left) != 0 {
				t.Errorf("old process still runs with a request parked on it: %+v", left)
			}
			st, _ := json.Marshal(r.Result.RequestState)
			answer := `,"inputResponses":{"` + key + `":{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"m"}},"requestState":` + string(st)
			status, body, err = atkModern(g, 10*time.Second, "s", "2", "sample", `{"prompt":"p"}`, answer)
			if err != nil {
				t.Fatalf("retry after the reload: %v (a hang?)", err)
			}
			t.Logf("retry after the reload (%s): %d %s", mode, status, body)
			if strings.Contains(body, "Paris") {
				t.Errorf("the retry after the reload was served: %s", body)
			}
		})
	}
}

// TestReloadFaultsEndpointMemberChangedMidCall: a reload changes one
// member (b) of an endpoint while the endpoint's session has a call in
// flight on its other member (a), and a's own session has one too: the
// endpoint's call is answered once, with the endpoint's reason; a's own
// call is untouched and completes on the same process; the endpoint
// serves again after a new initialize.
func TestReloadFaultsEndpointMemberChangedMidCall(t *testing.T) {
	stamp := time.Now().UnixNano()
	cfg := newConfig(fakeServer("a", mcptest.FakeOptions{Marker: fmt.Sprintf("rle-a-%d-x", stamp)}),
		fakeServer("b", mcptest.FakeOptions{Marker: fmt.Sprintf("rle-b-%d-x", stamp)}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a", "b"})
	g, _ := startServing(t, cfg, ReloadOptions{})
	ep := g.endpointClient("all")
	ep.connect(t)
	a := g.client("a")
	a.connect(t)
	aPID := pidOf(t, a)

	// The endpoint's call in flight on a.
	epDone := make(chan *reply, 1)
	go func() {
		epDone <- ep.do(t, ep.request(http.MethodPost, callBody("5", "a__slow", map[string]any{"ms": 600000}, "")), nil)
	}()
	// a's own call, short enough to finish after the reload.
	aDone := make(chan *reply, 1)
	go func() {
		aDone <- a.do(t, a.request(http.MethodPost, callBody("6", "slow", map[string]any{"ms": 1500}, "")), nil)
	}()
	waitFor(t, "both calls upstream", func() bool { return g.gw.servers["a"].Pending() >= 2 })

	next := cloneConfig(cfg)
	next.Servers["b"] = fakeServer("b", mcptest.FakeOptions{Marker: fmt.Sprintf("rle-b2-%d-x", stamp)})
	sum, err := g.gw.reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.EndpointsRebuilt, []string{"all"}) || !slices.Equal(sum.Changed, []string{"b"}) {
		t.Errorf("summary %+v", sum)
	}
	select {
	case r := <-epDone:
		if len(r.Msgs) != 1 {
			t.Fatalf("endpoint call: %d messages %s", len(r.Msgs), r.Body)
		}
		m := r.final(t)
		if m.Error == nil || !strings.Contains(m.Error.Message, reasonEndpointChanged) || string(m.ID) != "5" {
			t.Errorf("endpoint call in flight: %s, want an error naming %q", r.Msgs[0], reasonEndpointChanged)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the endpoint's call in flight got no answer")
	}
	select {
	case r := <-aDone:
		if r.Status != http.StatusOK || len(r.Msgs) != 1 || r.final(t).Error != nil {
			t.Errorf("a's own call across the reload: %d %s %s", r.Status, r.Body, r.Msgs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a's own call got no answer")
	}
	if got := pidOf(t, a); got != aPID {
		t.Errorf("a's pid %s, was %s", got, aPID)
	}
	// The upstream request of the endpoint's call was cancelled: nothing
	// pending on a but what is asked now.
	waitFor(t, "a's pending requests to drain", func() bool { return g.gw.servers["a"].Pending() == 0 })
	ep2 := g.endpointClient("all")
	ep2.connect(t)
	if r := ep2.post(t, callBody("7", "b__echo", map[string]string{"message": "nb"}, "")); r.Status != 200 || toolText(t, r.final(t)) != "nb" {
		t.Errorf("endpoint after the reload: %d %s", r.Status, r.Body)
	}
}

// TestReloadFaultsLegacySession: a 2024-11-05 HTTP+SSE session with a
// call in flight on a server a reload removes: the call is answered on
// the stream with the reason, then the stream ends; its /messages URL is
// 404 after.
func TestReloadFaultsLegacySession(t *testing.T) {
	cfg := newConfig(fakeServer("a", mcptest.FakeOptions{}), fakeServer("k", mcptest.FakeOptions{}))
	g, _ := startServing(t, cfg, ReloadOptions{})
	c := openLegacy(t, g, "/servers/a/sse", nil)
	c.initialize()
	if st := c.post(callBody("5", "slow", map[string]any{"ms": 600000}, "")); st != http.StatusAccepted {
		t.Fatalf("slow call: %d", st)
	}
	waitFor(t, "the call upstream", func() bool { return g.gw.servers["a"].Pending() == 1 })
	next := cloneConfig(cfg)
	delete(next.Servers, "a")
	if err := g.gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	var answered int
	for {
		var ev sseEvent
		var ok bool
		select {
		case e, more := <-c.events:
			ev, ok = sseEvent{e.Event, string(e.Data)}, more
		case <-time.After(20 * time.Second):
			t.Fatal("the legacy stream neither answered nor ended after the reload")
		}
		if !ok {
			break
		}
		if ev.event == "message" && strings.Contains(ev.data, `"id":5`) {
			answered++
			if !strings.Contains(ev.data, reasonServerRemoved) {
				t.Errorf("the call in flight: %s, want the reason", ev.data)
			}
		}
	}
	if answered != 1 {
		t.Errorf("the call in flight was answered %d times, want 1", answered)
	}
	if st := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); st != http.StatusNotFound {
		t.Errorf("/messages of the ended legacy session: %d, want 404", st)
	}
}

type sseEvent struct{ event, data string }
