package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// clientFile is a fixture of another client's config, in its documented
// format.
func clientFile(t *testing.T, parts ...string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(append([]string{"testdata", "clients"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// env is a lookupEnv over a map.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func load(t *testing.T, path string, opts Options) *Config {
	t.Helper()
	if opts.LookupEnv == nil {
		opts.LookupEnv = env(nil)
	}
	cfg, err := LoadWith(path, opts)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg
}

// names returns the sorted keys of m.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Cline's file: "disabled", "autoApprove" and "timeout" in seconds
// (Cline's unit) are accepted; the disabled server is kept apart; one
// note per autoApprove that approves something; Cline's "streamableHttp"
// is "http".
func TestClineSettings(t *testing.T) {
	cfg := load(t, clientFile(t, "cline", "cline_mcp_settings.json"), Options{})
	if got := keys(cfg.Servers); !slices.Equal(got, []string{"docs", "memory"}) {
		t.Errorf("servers %v, want docs, memory", got)
	}
	if got := keys(cfg.Disabled); !slices.Equal(got, []string{"github"}) {
		t.Errorf("disabled %v, want github", got)
	}
	if m := cfg.Servers["memory"]; m.Timeout != time.Minute || m.Type != TypeStdio {
		t.Errorf("memory: timeout %v type %q, want 1m stdio", m.Timeout, m.Type)
	}
	if d := cfg.Servers["docs"]; d.Type != TypeHTTP || d.Timeout != 30*time.Minute {
		t.Errorf("docs: type %q timeout %v, want http 30m", d.Type, d.Timeout)
	}
	if g := cfg.Disabled["github"]; g.Timeout != 5*time.Minute {
		t.Errorf("github (disabled) timeout %v, want 5m", g.Timeout)
	}
	if !slices.Equal(cfg.EndpointNames(), []string{"all"}) || !slices.Equal(cfg.Endpoints["all"].Servers, []string{"docs", "memory"}) {
		t.Errorf("endpoint all = %v: a disabled server is no member", cfg.Endpoints["all"].Servers)
	}
	var paths []string
	for _, n := range cfg.Notes {
		paths = append(paths, n.Path)
		if !strings.Contains(n.String(), "accepted and ignored") {
			t.Errorf("note %q", n)
		}
	}
	if want := []string{"mcpServers.memory.autoApprove"}; !slices.Equal(paths, want) { // the others are empty
		t.Errorf("notes %q, want %q", paths, want)
	}
}

// Roo's file: "alwaysAllow" noted, "disabledTools" denied by exact name,
// "streamable-http" is "http".
func TestRooSettings(t *testing.T) {
	cfg := load(t, clientFile(t, "roo", "mcp_settings.json"), Options{})
	fs := cfg.Servers["filesystem"]
	if !slices.Equal(fs.Tools.Deny, []string{"move_file", "write_file"}) || fs.Timeout != time.Minute {
		t.Errorf("filesystem: deny %q timeout %v", fs.Tools.Deny, fs.Timeout)
	}
	if cfg.Servers["context"].Type != TypeHTTP {
		t.Errorf("context type %q", cfg.Servers["context"].Type)
	}
	if len(cfg.Notes) != 1 || cfg.Notes[0].Path != "mcpServers.filesystem.alwaysAllow" || cfg.Notes[0].Server != "filesystem" {
		t.Errorf("notes %+v", cfg.Notes)
	}
}

// Cursor's .cursor/mcp.json: ${workspaceFolder} is the directory holding
// .cursor, envFile is read under "env", ${env:NAME} reads the
// environment, "timeout": 60000 is a minute.
func TestCursorMCPJSON(t *testing.T) {
	file := clientFile(t, "cursor", ".cursor", "mcp.json")
	ws := filepath.Dir(filepath.Dir(file))
	cfg := load(t, file, Options{LookupEnv: env(map[string]string{"DOCS_TOKEN": "tok"})})
	pf := cfg.Servers["project-files"]
	if pf.Args[2] != ws || pf.Timeout != time.Minute {
		t.Errorf("project-files: args %q timeout %v, want %s and 1m", pf.Args, pf.Timeout, ws)
	}
	want := map[string]string{"LOG_LEVEL": "debug", "ROOT_LABEL": "my project", "API_BASE": "https://api.example.com"}
	if !mapsEqual(pf.Env, want) {
		t.Errorf("project-files env %q, want %q (env wins over envFile)", pf.Env, want)
	}
	if got := cfg.Servers["docs"].Headers["Authorization"]; got != "Bearer tok" {
		t.Errorf("docs Authorization %q", got)
	}
	if _, ok := cfg.Disabled["sentry"]; !ok || len(cfg.Servers) != 3 {
		t.Errorf("servers %v disabled %v", keys(cfg.Servers), keys(cfg.Disabled))
	}

	_, err := LoadWith(file, Options{LookupEnv: env(nil)})
	assertProblem(t, err, "mcpServers.docs.headers.Authorization", `environment variable "DOCS_TOKEN" is not set (for ${env:DOCS_TOKEN})`)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// assertProblem checks that err holds a problem at path containing msg.
func assertProblem(t *testing.T, err error, path, msg string) {
	t.Helper()
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err %v, want problems", err)
	}
	for _, p := range ps {
		if p.Path == path && strings.Contains(p.Msg, msg) {
			return
		}
	}
	t.Errorf("problems:\n%v\nwant %s: ...%s...", err, path, msg)
}

// Windsurf's mcp_config.json: "serverUrl" is "url", "disabledTools" and
// "disabled" as the others.
func TestWindsurfConfig(t *testing.T) {
	cfg := load(t, clientFile(t, "windsurf", "mcp_config.json"), Options{})
	if l := cfg.Servers["linear"]; l == nil || l.URL != "https://mcp.linear.app/sse" || l.Type != TypeSSE {
		t.Errorf("linear: %+v", l)
	}
	if g := cfg.Servers["git"]; !slices.Equal(g.Tools.Deny, []string{"git_reset", "git_create_branch"}) {
		t.Errorf("git deny %q", g.Tools.Deny)
	}
	if _, ok := cfg.Disabled["brave-search"]; !ok {
		t.Errorf("brave-search not disabled: %v", keys(cfg.Disabled))
	}
}

// VS Code's .vscode/mcp.json: "servers" with "type", inputs answered by
// MCPGATE_INPUT_<ID> or their default, ${workspaceFolder} the folder
// holding .vscode; problems at the file's own key paths.
func TestVSCodeMCPJSON(t *testing.T) {
	file := clientFile(t, "vscode", ".vscode", "mcp.json")
	vars := map[string]string{"MCPGATE_INPUT_PERPLEXITY_KEY": "pplx", "GITHUB_TOKEN": "gh"}
	cfg := load(t, file, Options{LookupEnv: env(vars)})
	if got := keys(cfg.Servers); !slices.Equal(got, []string{"github", "legacy", "perplexity", "workspace-fs"}) {
		t.Fatalf("servers %v", got)
	}
	if e := cfg.Servers["perplexity"].Env; e["PERPLEXITY_API_KEY"] != "pplx" || e["PERPLEXITY_REGION"] != "eu" {
		t.Errorf("perplexity env %q: the input from its variable, the region from its default", e)
	}
	if a := cfg.Servers["workspace-fs"].Args; a[2] != filepath.Dir(filepath.Dir(file)) {
		t.Errorf("workspace-fs args %q", a)
	}
	if cfg.Servers["github"].Type != TypeHTTP || cfg.Servers["legacy"].Type != TypeSSE {
		t.Errorf("types %q %q", cfg.Servers["github"].Type, cfg.Servers["legacy"].Type)
	}

	_, err := LoadWith(file, Options{LookupEnv: env(map[string]string{"GITHUB_TOKEN": "gh"})})
	assertProblem(t, err, "servers.perplexity.env.PERPLEXITY_API_KEY",
		`${input:perplexity-key}: the gateway cannot prompt for input "perplexity-key": set the environment variable MCPGATE_INPUT_PERPLEXITY_KEY`)
}

// A VS Code file's problems, found by decoding or by Validate, name the
// file's keys ("servers...."), and ${workspaceFolder} outside a .vscode
// directory, or an input not declared, is a problem at its key.
func TestVSCodeProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	writeTemp(t, path, `{
  "inputs": [{"type": "promptString", "description": "no id"}],
  "servers": {
    "a": {"type": "stdio", "command": "x", "args": ["${workspaceFolder}", "${input:nope}"]},
    "b": {"type": "http"},
    "c": {"type": "stdio", "command": "y", "isolation": "alone"}
  }
}`)
	_, err := LoadWith(path, Options{LookupEnv: env(nil)})
	assertProblem(t, err, "inputs[0].id", "required")
	assertProblem(t, err, "servers.a.args[0]", "${workspaceFolder}: the config file is not in a .vscode or .cursor directory")
	assertProblem(t, err, "servers.a.args[1]", `${input:nope}: no input "nope" is declared in "inputs"`)
	assertProblem(t, err, "servers.b.url", "required")
	assertProblem(t, err, "servers.c.isolation", `"alone" is not one of`)
	if strings.Contains(err.Error(), "mcpServers") {
		t.Errorf("a problem names mcpServers, which the file does not have:\n%v", err)
	}

	writeTemp(t, path, `{"servers": {}}`)
	_, err = LoadWith(path, Options{})
	assertProblem(t, err, "servers", "no servers configured")
}

func writeTemp(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Claude Code's ~/.claude.json: the top-level servers alone, or with
// --project a project's merged over them (the project's "memory" wins).
func TestClaudeCodeProjects(t *testing.T) {
	file := clientFile(t, "claude", ".claude.json")
	cfg := load(t, file, Options{})
	if got := keys(cfg.Servers); !slices.Equal(got, []string{"memory", "sequential-thinking"}) {
		t.Errorf("user servers %v", got)
	}
	cfg = load(t, file, Options{Project: "/home/dev/app/"})
	if got := keys(cfg.Servers); !slices.Equal(got, []string{"db", "memory", "sequential-thinking"}) {
		t.Errorf("project servers %v", got)
	}
	if got := cfg.Servers["memory"].Env["MEMORY_FILE_PATH"]; got != "/home/dev/app/.memory.jsonl" {
		t.Errorf("memory env %q: the project's entry must win", got)
	}
	if cfg.Servers["db"].Type != TypeHTTP {
		t.Errorf("db %+v", cfg.Servers["db"])
	}

	_, err := LoadWith(file, Options{Project: "/home/dev/nope"})
	assertProblem(t, err, "projects", `no project "/home/dev/nope" (projects with servers: "/home/dev/app")`)

	path := filepath.Join(t.TempDir(), ".claude.json")
	writeTemp(t, path, `{"projects": {"/p": {"mcpServers": {"a": {"command": "x", "comand": "y"}}}}}`)
	_, err = LoadWith(path, Options{})
	assertProblem(t, err, "mcpServers", `choose a project's servers with --project PATH (projects with servers: "/p")`)
	_, err = LoadWith(path, Options{Project: "/p"})
	assertProblem(t, err, `projects["/p"].mcpServers.a.comand`, "unknown key")

	_, err = LoadWith(clientFile(t, "cline", "cline_mcp_settings.json"), Options{Project: "/p"})
	assertProblem(t, err, "", `--project "/p": the file has no "projects"`)
}

// A project's server with a bad value is reported at the project's key,
// not at "mcpServers".
func TestClaudeCodeProjectProblemPaths(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".claude.json")
	writeTemp(t, path, `{"mcpServers": {"a": {"command": "x"}}, "projects": {"/p": {"mcpServers": {"b": {"type": "http"}}}}}`)
	_, err := LoadWith(path, Options{Project: "/p"})
	assertProblem(t, err, `projects["/p"].mcpServers.b.url`, "required")
}

// Disabled servers are checked like the others, kept out of endpoints,
// and an endpoint naming one is told so.
func TestDisabledServers(t *testing.T) {
	_, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "disabled": true, "isolation": "alone"}},
		"gateway": {"endpoints": {"e": {"servers": ["a", "b"]}}}}`), nil)
	assertProblem(t, err, "mcpServers.b.isolation", `"alone" is not one of`)
	assertProblem(t, err, "gateway.endpoints.e.servers[1]", `server "b" is disabled`)

	_, err = Parse([]byte(`{"mcpServers": {"a": {"command": "x", "disabled": true}}}`), nil)
	assertProblem(t, err, "mcpServers", "every server is disabled")

	_, err = Parse([]byte(`{"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}`), nil)
	assertProblem(t, err, "mcpServers.a.disabled", "must be true or false")
}
