package gateway

// Attacks on hot reload by the config file: a retargeted symlink, a
// half-written file, unrelated changes in its directory.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

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
