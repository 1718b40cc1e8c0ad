package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestReloadOnTrigger: a receive on ReloadOptions.Trigger (what SIGHUP
// sends) reloads the config Load returns.
func TestReloadOnTrigger(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	next := cloneConfig(cfg)
	next.Servers["b"] = fakeServer("b", testkit.FakeOptions{})
	trigger := make(chan os.Signal)
	reloaded := make(chan ReloadSummary, 1)
	g, _ := startReloading(t, cfg, ReloadOptions{
		Trigger:  trigger,
		Load:     func() (*config.Config, error) { return next, nil },
		Reloaded: func(s ReloadSummary, err error) { reloaded <- s },
	})
	g.client("a").connect(t)
	trigger <- syscall.SIGHUP // a value on a channel: no signal is sent
	select {
	case s := <-reloaded:
		if !slices.Equal(s.Added, []string{"b"}) {
			t.Errorf("added %v, want [b]", s.Added)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload after the trigger")
	}
	b := g.client("b")
	b.connect(t)
	echoOK(t, b, "b")
}

// TestReloadOnFileChange: rewriting the config file (by rename, as
// editors do) reloads it; rewriting the same bytes does not.
func TestReloadOnFileChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpgate.json")
	write := func(servers ...string) []byte {
		t.Helper()
		b := configJSON(t, servers...)
		tmp := filepath.Join(dir, ".mcpgate.json.tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		return b
	}
	write("a")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		sum ReloadSummary
		err error
	}
	reloaded := make(chan result, 4)
	g, _ := startReloading(t, cfg, ReloadOptions{
		Path: path, Watch: true, Debounce: 20 * time.Millisecond,
		Reloaded: func(s ReloadSummary, err error) { reloaded <- result{s, err} },
	})
	a := g.client("a")
	a.connect(t)

	write("a")      // the same bytes: no reload
	write("a", "b") // b added
	select {
	case r := <-reloaded:
		if r.err != nil || !slices.Equal(r.sum.Added, []string{"b"}) || !slices.Equal(r.sum.Unchanged, []string{"a"}) {
			t.Fatalf("first reload: %+v, %v; want b added, a unchanged", r.sum, r.err)
		}
		if !slices.Equal(r.sum.EndpointsUpdated, []string{"all"}) {
			t.Errorf("endpoints updated %v, want [all]", r.sum.EndpointsUpdated)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload after the file changed")
	}
	echoOK(t, a, "a kept its session")
	b := g.client("b")
	b.connect(t)
	echoOK(t, b, "b")

	// A file that does not load is refused; the gateway goes on.
	if err := os.WriteFile(path, []byte(`{"mcpServers": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-reloaded:
		if r.err == nil {
			t.Fatal("a broken file was applied")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload attempt after the file broke")
	}
	echoOK(t, b, "b still served")
	if _, servers, _ := g.gw.current(); !slices.Equal(slices.Sorted(maps.Keys(servers)), []string{"a", "b"}) {
		t.Errorf("servers %v after a refused reload", slices.Sorted(maps.Keys(servers)))
	}
}

// configJSON is a config file serving fake servers of those names.
func configJSON(t *testing.T, servers ...string) []byte {
	t.Helper()
	ms := map[string]any{}
	for _, name := range servers {
		s := fakeServer(name, testkit.FakeOptions{})
		ms[name] = map[string]any{"command": s.Command, "args": s.Args, "env": s.Env}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": ms})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReloadOnConfigMapSwap: a config file mounted as Kubernetes mounts a
// ConfigMap (FILE -> ..data/FILE, ..data -> a versioned directory) is
// reloaded when ..data is swapped to a new version.
func TestReloadOnConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name string, servers ...string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "mcpgate.json"), configJSON(t, servers...), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", "a")
	path := filepath.Join(dir, "mcpgate.json")
	if err := os.Symlink(filepath.Join("..data", "mcpgate.json"), path); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan ReloadSummary, 4)
	g, _ := startReloading(t, cfg, ReloadOptions{
		Path: path, Watch: true, Debounce: 20 * time.Millisecond,
		Reloaded: func(s ReloadSummary, err error) {
			if err == nil {
				reloaded <- s
			}
		},
	})
	version("..v2", "a", "b")
	select {
	case s := <-reloaded:
		if !slices.Equal(s.Added, []string{"b"}) {
			t.Fatalf("added %v, want [b]", s.Added)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload after the ConfigMap swap")
	}
	b := g.client("b")
	b.connect(t)
	echoOK(t, b, "b")
}

// The seal key file is watched with the config: a Kubernetes Secret
// updated for a rotation (add, promote) reloads the keys with no signal,
// and the ring then seals with the promoted key and still opens what the
// old one sealed.
func TestWatchSealKeyFile(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys", "seal.json")
	if err := os.Mkdir(filepath.Dir(keys), 0o700); err != nil {
		t.Fatal(err)
	}
	writeKeys := func(entries ...string) {
		t.Helper()
		if err := os.WriteFile(keys, []byte("["+strings.Join(entries, ",")+"]"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k := func(id string, b byte, primary bool) string {
		return fmt.Sprintf(`{"id": %q, "key": %q, "primary": %v}`, id, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)), primary)
	}
	writeKeys(k("k1", 1, true))
	var cfgJSON map[string]any
	if err := json.Unmarshal(configJSON(t, "a"), &cfgJSON); err != nil {
		t.Fatal(err)
	}
	cfgJSON["gateway"] = map[string]any{"sealKeyFile": keys}
	data, _ := json.Marshal(cfgJSON)
	path := filepath.Join(dir, "mcpgate.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan error, 8)
	g, _ := startServing(t, cfg, ReloadOptions{
		Path: path, Watch: true, Debounce: 20 * time.Millisecond,
		Reloaded: func(_ ReloadSummary, err error) { reloaded <- err },
	})
	ring := g.gw.ring
	byK1 := ring.Seal("test", []byte("v"), time.Hour)

	writeKeys(k("k1", 1, false), k("k2", 2, true)) // add and promote at once: one replica's view
	select {
	case err := <-reloaded:
		if err != nil {
			t.Fatalf("reload after the key file changed: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("changing the seal key file did not reload")
	}
	if got, err := ring.Open("test", byK1); err != nil || string(got) != "v" {
		t.Errorf("a value sealed by k1 after k2 was promoted: %q, %v", got, err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(ring.Seal("test", []byte("v"), time.Hour))
	if id := string(raw[2 : 2+int(raw[1])]); id != "k2" {
		t.Errorf("the ring seals with %q after the rotation, want k2", id)
	}
}
