package servers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
)

// baseEnv names the variables of the gateway's environment every stdio
// process gets: what a program needs to find its tools, its home and its
// locale. Anything else (tokens meant for remote servers' headers, cloud
// credentials) stays with the gateway unless a server lists it in
// inheritEnv.
var baseEnv = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// Environ returns the whole environment of cfg's process, as KEY=value
// sorted by key: the baseEnv variables and cfg.InheritEnv that lookup finds
// set, then cfg.Env, which wins. lookup is os.LookupEnv outside tests.
func Environ(cfg *config.Server, lookup func(string) (string, bool)) []string {
	env := make(map[string]string, len(baseEnv)+len(cfg.InheritEnv)+len(cfg.Env))
	for _, names := range [][]string{baseEnv, cfg.InheritEnv} {
		for _, k := range names {
			if v, ok := lookup(k); ok {
				env[k] = v
			}
		}
	}
	for k, v := range cfg.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// ErrBadCwd is matched (errors.Is) by CheckCommand's error when the
// server's cwd, not its command, is the problem, so that a report can name
// the right key.
var ErrBadCwd = errors.New("working directory is not a directory")

// cwdError is CheckCommand's error for a cwd that is not a directory.
type cwdError struct{ dir string }

func (e cwdError) Error() string      { return "working directory " + e.dir + " is not a directory" }
func (cwdError) Is(target error) bool { return target == ErrBadCwd }

// CheckCommand reports why cfg's command could not be started, or nil if it
// can (and for remote servers, which run nothing). It looks the command up
// the way the process will be started: in the gateway's PATH when it has no
// slash, else relative to cwd. The messages match the upstream's spawn
// errors: "command not found: uvx", "cannot run ./x: permission denied".
func CheckCommand(cfg *config.Server) error {
	if cfg.Type != config.TypeStdio {
		return nil
	}
	if cfg.Cwd != "" {
		if fi, err := os.Stat(cfg.Cwd); err != nil || !fi.IsDir() {
			return cwdError{cfg.Cwd}
		}
	}
	if !strings.ContainsRune(cfg.Command, filepath.Separator) {
		if _, err := exec.LookPath(cfg.Command); err != nil {
			if errors.Is(err, exec.ErrNotFound) {
				return fmt.Errorf("command not found: %s", cfg.Command)
			}
			return fmt.Errorf("cannot run %s: %v", cfg.Command, errors.Unwrap(err))
		}
		return nil
	}
	path := cfg.Command
	if !filepath.IsAbs(path) && cfg.Cwd != "" {
		path = filepath.Join(cfg.Cwd, path)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("command not found: %s", cfg.Command)
	case err != nil:
		return fmt.Errorf("cannot run %s: %v", cfg.Command, errors.Unwrap(err))
	case fi.IsDir():
		return fmt.Errorf("cannot run %s: is a directory", cfg.Command)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("cannot run %s: permission denied", cfg.Command)
	}
	return nil
}
