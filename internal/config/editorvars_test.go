package config

import (
	"path/filepath"
	"testing"
)

func TestInputVariable(t *testing.T) {
	for id, want := range map[string]string{"perplexity-key": "MCPGATE_INPUT_PERPLEXITY_KEY", "apiKey": "MCPGATE_INPUT_APIKEY", "a.b c": "MCPGATE_INPUT_A_B_C"} {
		if got := InputVariable(id); got != want {
			t.Errorf("InputVariable(%q) = %q, want %q", id, got, want)
		}
	}
}

// The editor variables resolve as VS Code and Cursor resolve them; a
// plain ${VAR} still reads the environment, ${VAR:-default} too.
func TestEditorVariables(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ws", ".cursor", "mcp.json")
	writeTemp(t, file, `{"mcpServers": {"a": {"command": "x", "args": ["${workspaceFolder}", "${workspaceFolderBasename}", "${userHome}${/}f", "${env:TOKEN}", "${TOKEN}", "${NOPE:-d}", "${pathSeparator}"]}}}`)
	cfg, err := LoadWith(file, Options{LookupEnv: env(map[string]string{"HOME": "/home/u", "TOKEN": "t"})})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "ws"), "ws", "/home/u/f", "t", "t", "d", "/"}
	if got := cfg.Servers["a"].Args; len(got) != len(want) {
		t.Fatalf("args %q", got)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("args[%d] = %q, want %q", i, got[i], want[i])
			}
		}
	}
	_, err = Parse([]byte(`{"mcpServers": {"a": {"command": "${userHome}/x", "args": ["${workspaceFolder}"]}}}`), nil)
	assertProblem(t, err, "mcpServers.a.command", "${userHome}: HOME is not set")
	assertProblem(t, err, "mcpServers.a.args[0]", "${workspaceFolder}: the config was not read from a file")
}
