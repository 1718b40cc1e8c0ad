package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a config file of another client, in its documented format
// (internal/config/testdata/clients).
func fixture(t *testing.T, parts ...string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(append([]string{"..", "..", "internal", "config", "testdata", "clients"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// validate reads each client's file as that client wrote it.
func TestValidateOtherClients(t *testing.T) {
	t.Setenv("DOCS_TOKEN", "t")
	t.Setenv("GITHUB_TOKEN", "g")
	t.Setenv("MCPGATE_INPUT_PERPLEXITY_KEY", "p")
	for _, c := range []struct {
		file    []string
		project string
		ok      string // the stdout line after "FILE: "
		stderr  []string
	}{
		{[]string{"cline", "cline_mcp_settings.json"}, "", "ok (2 servers, 1 disabled)",
			[]string{"note: mcpServers.memory.autoApprove: accepted and ignored"}},
		{[]string{"roo", "mcp_settings.json"}, "", "ok (2 servers)", []string{"note: mcpServers.filesystem.alwaysAllow"}},
		{[]string{"cursor", ".cursor", "mcp.json"}, "", "ok (3 servers, 1 disabled)", nil},
		{[]string{"windsurf", "mcp_config.json"}, "", "ok (2 servers, 1 disabled)", nil},
		{[]string{"vscode", ".vscode", "mcp.json"}, "", "ok (4 servers)", nil},
		{[]string{"claude", ".claude.json"}, "", "ok (2 servers)", nil},
		{[]string{"claude", ".claude.json"}, "/home/dev/app", "ok (3 servers)", nil},
	} {
		file := fixture(t, c.file...)
		args := []string{"validate", "--config", file}
		if c.project != "" {
			args = append(args, "--project", c.project)
		}
		r := runCLI(args...)
		if r.code != 0 || r.stdout != file+": "+c.ok+"\n" {
			t.Errorf("%s: code %d, stdout %q, want %q; stderr %q", filepath.Join(c.file...), r.code, r.stdout, c.ok, r.stderr)
		}
		for _, want := range c.stderr {
			if !strings.Contains(r.stderr, file+": "+want) {
				t.Errorf("%s: stderr %q lacks %q", filepath.Join(c.file...), r.stderr, want)
			}
		}
	}
}

// validate's problems with other clients' files name the file's keys.
func TestValidateOtherClientsProblems(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "g")
	vscode := fixture(t, "vscode", ".vscode", "mcp.json")
	r := runCLI("validate", "--config", vscode)
	want := vscode + `: servers.perplexity.env.PERPLEXITY_API_KEY: ${input:perplexity-key}: the gateway cannot prompt for input "perplexity-key": set the environment variable MCPGATE_INPUT_PERPLEXITY_KEY` + "\n"
	if r.code != 1 || r.stdout != want {
		t.Errorf("code %d, stdout %q, want %q", r.code, r.stdout, want)
	}

	claude := fixture(t, "claude", ".claude.json")
	r = runCLI("validate", "--config", claude, "--project", "/home/dev/elsewhere")
	if r.code != 1 || !strings.Contains(r.stdout, `projects: no project "/home/dev/elsewhere" (projects with servers: "/home/dev/app")`) {
		t.Errorf("unknown project: code %d, stdout %q", r.code, r.stdout)
	}
	r = runCLI("validate", "--config", fixture(t, "cline", "cline_mcp_settings.json"), "--project", "/p")
	if r.code != 1 || !strings.Contains(r.stdout, `--project "/p": the file has no "projects"`) {
		t.Errorf("--project on a Cline file: code %d, stdout %q", r.code, r.stdout)
	}
}

// A mistyped policy field is a problem validate reports at its key.
func TestValidateMistypedPolicy(t *testing.T) {
	file := writeFile(t, "c.json", `{"mcpServers": {"x": {"command": "sh", "policy": {"rules": [{"tools": ["*"]}, {"when": "principal.nme == 1"}]}}}}`)
	r := runCLI("validate", "--config", file)
	want := file + `: mcpServers.x.policy.rules[1].when: 1:10: undefined field 'nme' (principal has name, kind, scopes, claims, issuer)` + "\n"
	if r.code != 1 || r.stdout != want {
		t.Errorf("code %d, stdout %q, want %q", r.code, r.stdout, want)
	}
}

// serve --project serves the project's servers over the user's, and logs
// each ignored key once, naming its server; --project needs --config.
func TestServeProject(t *testing.T) {
	gw := stubGateway(t, nil)
	r := runCLI("serve", "--config", fixture(t, "claude", ".claude.json"), "--project", "/home/dev/app", "--watch=false")
	if r.code != 0 || gw.calls != 1 || len(gw.cfg.Servers) != 3 || gw.cfg.Servers["db"] == nil {
		t.Fatalf("code %d, stderr %q, servers %v", r.code, r.stderr, gw.cfg)
	}
	if got := gw.cfg.Servers["memory"].Env["MEMORY_FILE_PATH"]; got != "/home/dev/app/.memory.jsonl" {
		t.Errorf("memory env %q: the project's entry must win", got)
	}

	gw = stubGateway(t, nil)
	r = runCLI("serve", "--config", fixture(t, "cline", "cline_mcp_settings.json"), "--watch=false")
	if r.code != 0 || gw.calls != 1 {
		t.Fatalf("cline: code %d, stderr %q", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, "config key ignored"); n != 1 || !strings.Contains(r.stderr, "server=memory key=mcpServers.memory.autoApprove") {
		t.Errorf("stderr %q, want one line, for the one autoApprove that approves something", r.stderr)
	}
	if _, ok := gw.cfg.Disabled["github"]; !ok || gw.cfg.Servers["github"] != nil {
		t.Errorf("github not disabled")
	}

	if r := runCLI("serve", "--project", "/p", "--", "cat"); r.code != exitUsage || !strings.Contains(r.stderr, "--project needs --config") {
		t.Errorf("--project without --config: code %d, stderr %q", r.code, r.stderr)
	}
}
