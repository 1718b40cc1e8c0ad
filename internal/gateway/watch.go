package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/mcpgate/mcpgate/internal/config"
)

// This file is what triggers a reload: a signal on ReloadOptions.Trigger
// (cmd/mcpgate's SIGHUP channel), and, with Watch, a change of the
// config file. The file's directory is watched, not the file: editors and
// config managers replace a file by renaming a new one over it, which
// ends a watch on the file itself. A file that is a symlink has the
// directory of its target watched too, and Kubernetes' swap of a
// ConfigMap volume's "..data" symlink counts as a change. Events are
// debounced (a save is often several writes) and the file's content hash
// compared with the last loaded one, so a touch or a rewrite of the same
// bytes reloads nothing. Events on other files of the directories (a log
// written beside the config) are ignored: they would keep the debounce
// from ever firing.
// A SIGHUP always reloads (also re-reading API key files), and reopens
// the audit log's file.
//
// One goroutine (watchLoop) owns the watcher and runs every reload; it
// ends when the gateway's context ends, before serve returns.

// DefaultDebounce is how long the watcher waits after the last event on
// the config file before it reloads.
const DefaultDebounce = 200 * time.Millisecond

// ReloadOptions say how a served gateway reloads its config. The zero
// value reloads nothing.
type ReloadOptions struct {
	// Path is the config file (the one the gateway started from); watched
	// with Watch. Default "": none.
	Path string
	// Watch reloads when the file at Path changes. Default false.
	Watch bool
	// Load reads the new config: as serve read the first one (flag
	// overrides applied, validated, policies checked); its error may be
	// config.Problems. Default: config.Load(Path) then CheckPolicies.
	Load func() (*config.Config, error)
	// Trigger reloads on each signal received (cmd/mcpgate passes its
	// signal.Notify channel of SIGHUP; tests a channel of their own).
	// Default nil: none.
	Trigger <-chan os.Signal
	// Debounce is how long the file must stay quiet before a reload.
	// Default DefaultDebounce.
	Debounce time.Duration
	// Reloaded, if set, is called after each reload attempt (tests):
	// err is nil when it applied, else why not (its problems are logged).
	Reloaded func(ReloadSummary, error)
}

// RunWith is Run with reloads as opts say.
func RunWith(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ReloadOptions) error {
	ln, err := net.Listen("tcp", cfg.Gateway.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Gateway.Listen, err)
	}
	return ServeWith(ctx, ln, cfg, log, opts)
}

// ServeWith is Serve with reloads as opts say.
func ServeWith(ctx context.Context, ln net.Listener, cfg *config.Config, log *slog.Logger, opts ReloadOptions) error {
	g, err := Start(cfg, log)
	if err != nil {
		ln.Close()
		return err
	}
	return g.serveReloading(ctx, ln, opts)
}

// serveReloading is serve with a watchLoop beside it.
func (g *Gateway) serveReloading(ctx context.Context, ln net.Listener, opts ReloadOptions) error {
	return g.serveWatching(ctx, ln, g.watch(opts))
}

// watch sets g's reload options, opts with defaults, and starts watching
// the config file when they say so: it returns the watcher (nil: none),
// for serveWatching. Events come from the moment it returns.
func (g *Gateway) watch(opts ReloadOptions) *fsnotify.Watcher {
	if opts.Load == nil {
		path := opts.Path
		opts.Load = func() (*config.Config, error) {
			cfg, err := config.Load(path)
			if err == nil {
				err = CheckPolicies(cfg)
			}
			return cfg, err
		}
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	g.rl.opts = opts
	// The file as (about) loaded at start: later events compare with it.
	g.rl.hash = hashFiles(g.watchFiles(opts.Path))
	if !opts.Watch || opts.Path == "" {
		return nil
	}
	fw, err := watchDir(opts.Path)
	if err != nil {
		// Not fatal: SIGHUP still reloads.
		g.log.Warn("cannot watch the config file; reload it with SIGHUP", "file", opts.Path, "err", err)
		return nil
	}
	followAll(fw, g.watchFiles(opts.Path), g.log) // the seal key file's directory too
	return fw
}

// serveWatching is serve with a watchLoop on fw (nil: triggers only)
// beside it; the loop ends before it returns.
func (g *Gateway) serveWatching(ctx context.Context, ln net.Listener, fw *fsnotify.Watcher) error {
	loopCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { g.watchLoop(loopCtx, fw) })
	err := g.serve(ctx, ln)
	cancel()
	wg.Wait()
	return err
}

// watchDir watches the directory of file path, and of its target when
// it is a symlink.
func watchDir(path string) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	for _, name := range watchedNames(path) {
		if slices.Contains(w.WatchList(), filepath.Dir(name)) {
			continue
		}
		if err := w.Add(filepath.Dir(name)); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// watchedNames are the names whose events concern config file path: its
// own, and its target's when it is a symlink (as at start).
func watchedNames(path string) []string {
	names := []string{filepath.Clean(path)}
	if abs, err := filepath.Abs(path); err == nil {
		names[0] = abs
	}
	if target, err := filepath.EvalSymlinks(names[0]); err == nil && target != names[0] {
		names = append(names, target)
	}
	return names
}

// follow returns the names watchedNames gives for path now, and makes fw
// watch the directory of each (nil fw: names as they were).
func follow(fw *fsnotify.Watcher, path string, names []string, log *slog.Logger) []string {
	if fw == nil {
		return names
	}
	now := watchedNames(path)
	for _, name := range now {
		dir := filepath.Dir(name)
		if slices.Contains(fw.WatchList(), dir) {
			continue
		}
		if err := fw.Add(dir); err != nil {
			log.Warn("watching the config file's new target", "dir", dir, "err", err)
		}
	}
	return now
}

// concerns reports whether an event on name may have changed the config
// file: it is one of names, or a Kubernetes volume's "..data" swap.
func concerns(names []string, name string) bool {
	if abs, err := filepath.Abs(name); err == nil {
		name = abs
	}
	return slices.Contains(names, name) || strings.HasPrefix(filepath.Base(name), "..")
}

// watchLoop reloads on each trigger and, when fw is set, on each change of
// the config file, until ctx ends; it closes fw.
func (g *Gateway) watchLoop(ctx context.Context, fw *fsnotify.Watcher) {
	opts := g.rl.opts
	var events <-chan fsnotify.Event
	var errs <-chan error
	var names []string
	if fw != nil {
		defer fw.Close()
		events, errs = fw.Events, fw.Errors
		names = namesOf(g.watchFiles(opts.Path))
	}
	// The hash of the file as last loaded: an event that leaves it the
	// same (a touch, a save without edits) reloads nothing.
	lastHash := g.rl.hash
	debounce := time.NewTimer(opts.Debounce)
	debounce.Stop()
	defer debounce.Stop()
	reload := func() {
		cfg, err := opts.Load()
		var sum ReloadSummary
		if err == nil {
			sum, err = g.reload(cfg)
		} else {
			logProblems(g.log, err)
		}
		if errors.Is(err, ErrStopped) {
			return
		}
		if opts.Reloaded != nil {
			opts.Reloaded(sum, err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-opts.Trigger:
			if !ok {
				opts.Trigger = nil
				continue
			}
			g.reopenAudit() // audit.go: logrotate's postrotate signal
			g.log.Info("reloading the config", "trigger", sig.String(), "file", opts.Path)
			lastHash = hashFiles(g.watchFiles(opts.Path))
			reload()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Any event on the file: written, created, renamed over, removed
			// (then recreated: the hash decides).
			if concerns(names, ev.Name) {
				debounce.Reset(opts.Debounce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			g.log.Warn("watching the config file", "file", opts.Path, "err", err)
		case <-debounce.C:
			// The symlink may point elsewhere now: follow its target's
			// directory too, or edits there would go unseen.
			names = followAll(fw, g.watchFiles(opts.Path), g.log)
			h := hashFiles(g.watchFiles(opts.Path))
			if h == nil || bytes.Equal(h, lastHash) {
				continue // gone for now (a rename in progress), or the same bytes
			}
			lastHash = h
			g.log.Info("reloading the config", "trigger", "file changed", "file", opts.Path)
			reload()
		}
	}
}

// hashFile returns the SHA-256 of the file at path, or nil when it cannot
// be read.
func hashFile(path string) []byte {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// watchFiles are the files whose change reloads the config: the config
// file at path, and the seal key file it names (a Kubernetes Secret
// updated for a key rotation reloads the keys by itself).
func (g *Gateway) watchFiles(path string) []string {
	files := []string{path}
	if cfg, _, _ := g.current(); cfg != nil && cfg.Gateway.SealKeyFile != "" {
		files = append(files, cfg.Gateway.SealKeyFile)
	}
	return files
}

// namesOf is watchedNames of each of paths.
func namesOf(paths []string) []string {
	var names []string
	for _, p := range paths {
		names = append(names, watchedNames(p)...)
	}
	return names
}

// followAll is follow for each of paths: the names they give now, each
// one's directory watched.
func followAll(fw *fsnotify.Watcher, paths []string, log *slog.Logger) []string {
	var names []string
	for _, p := range paths {
		names = append(names, follow(fw, p, nil, log)...)
	}
	return names
}

// hashFiles is one SHA-256 over the files at paths (hashFile's of each);
// nil when the first cannot be read.
func hashFiles(paths []string) []byte {
	h := sha256.New()
	for i, p := range paths {
		sum := hashFile(p)
		if sum == nil && i == 0 {
			return nil
		}
		h.Write(sum)
	}
	return h.Sum(nil)
}
