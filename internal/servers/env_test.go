package servers

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestEnviron(t *testing.T) {
	gatewayEnv := map[string]string{
		"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", // TMPDIR unset
		"GITHUB_TOKEN": "secret", "AWS_SECRET_ACCESS_KEY": "secret", "NPM_TOKEN": "npm",
	}
	lookup := func(k string) (string, bool) { v, ok := gatewayEnv[k]; return v, ok }
	tests := []struct {
		name    string
		inherit []string
		env     map[string]string
		want    []string
	}{
		{"minimal", nil, nil, []string{"HOME=/home/u", "LANG=C.UTF-8", "PATH=/usr/bin"}},
		{"inherit", []string{"NPM_TOKEN", "UNSET_VAR"}, nil,
			[]string{"HOME=/home/u", "LANG=C.UTF-8", "NPM_TOKEN=npm", "PATH=/usr/bin"}},
		{"env wins", []string{"NPM_TOKEN"}, map[string]string{"NPM_TOKEN": "mine", "PATH": "/opt/bin", "X": ""},
			[]string{"HOME=/home/u", "LANG=C.UTF-8", "NPM_TOKEN=mine", "PATH=/opt/bin", "X="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Server{InheritEnv: tt.inherit, Env: tt.env}
			if got := Environ(cfg, lookup); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Environ = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestChildGetsMinimalEnvironment starts a real process through the
// backend and reads back the environment it saw: the gateway's secrets
// stay with the gateway.
func TestChildGetsMinimalEnvironment(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	t.Setenv("MCPGATE_TEST_SECRET", "s3cret")
	t.Setenv("MCPGATE_TEST_INHERITED", "passed")
	t.Setenv("MCPGATE_TEST_OVERRIDDEN", "from-gateway")
	out := filepath.Join(t.TempDir(), "env")
	cfg := testServer("envdump")
	cfg.Command = sh
	// The process writes its environment, then behaves like a server that
	// never answers, until its stdin closes.
	cfg.Args = []string{"-c", `env > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"; exec cat > /dev/null`}
	cfg.InheritEnv = []string{"MCPGATE_TEST_INHERITED", "MCPGATE_TEST_OVERRIDDEN"}
	cfg.Env = map[string]string{"OUT": out, "MCPGATE_TEST_OVERRIDDEN": "from-config"}
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var data []byte
	testkit.WaitFor(t, "the child to write its environment", func() bool {
		data, err = os.ReadFile(out)
		return err == nil
	})
	got := map[string]string{}
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		got[k] = v
	}
	if _, ok := got["MCPGATE_TEST_SECRET"]; ok {
		t.Error("the child inherited MCPGATE_TEST_SECRET, which no config names")
	}
	want := map[string]string{
		"MCPGATE_TEST_INHERITED":  "passed",
		"MCPGATE_TEST_OVERRIDDEN": "from-config",
		"OUT":                     out,
		"PATH":                    os.Getenv("PATH"),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("child's %s = %q, want %q", k, got[k], v)
		}
	}
	allowed := map[string]bool{"HOME": true, "LANG": true, "TMPDIR": true,
		"PWD": true, "SHLVL": true, "_": true, "OLDPWD": true} // the last four are sh's own
	for k := range got {
		if _, ok := want[k]; !ok && !allowed[k] {
			t.Errorf("child got %s from the gateway's environment", k)
		}
	}
}

// TestCheckCommandNamesCwd: a missing working directory is told apart
// from a missing command, so that validate names the cwd key.
func TestCheckCommandNamesCwd(t *testing.T) {
	cfg := testServer("a")
	cfg.Command = "sh"
	cfg.Cwd = filepath.Join(t.TempDir(), "nodir")
	err := CheckCommand(cfg)
	if !errors.Is(err, ErrBadCwd) || err.Error() != "working directory "+cfg.Cwd+" is not a directory" {
		t.Errorf("CheckCommand = %v, want ErrBadCwd naming the directory", err)
	}
	cfg.Cwd, cfg.Command = "", "mcpgate-test-no-such-command"
	if err := CheckCommand(cfg); err == nil || errors.Is(err, ErrBadCwd) {
		t.Errorf("CheckCommand for a missing command = %v, want a command error", err)
	}
}

// testServer returns a stdio server entry at the defaults.
func testServer(name string) *config.Server {
	g := config.Defaults()
	return g.NewServer(name)
}
