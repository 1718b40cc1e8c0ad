package stdio

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Stack traces as the runtimes print them when a server cannot start.
var (
	nodeESMMissing = []string{
		"node:internal/modules/esm/resolve:873",
		"  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);",
		"        ^",
		"",
		"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod' imported from /tmp/x/dist/index.js",
		"    at packageResolve (node:internal/modules/esm/resolve:873:9)",
		"    at moduleResolve (node:internal/modules/esm/resolve:946:18)",
		"    at defaultResolve (node:internal/modules/esm/resolve:1188:11)",
		"    at ModuleLoader.defaultResolve (node:internal/modules/esm/loader:642:12)",
		"    at async ModuleJob._link (node:internal/modules/esm/module_job:106:19) {",
		"  code: 'ERR_MODULE_NOT_FOUND'",
		"}",
		"",
		"Node.js v22.3.0",
	}
	nodeCJSMissing = []string{
		"node:internal/modules/cjs/loader:1228",
		"  throw err;",
		"  ^",
		"",
		"Error: Cannot find package 'zod'",
		"Require stack:",
		"- /tmp/x/index.js",
		"    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)",
		"    at Module._load (node:internal/modules/cjs/loader:1051:27)",
		"  code: 'MODULE_NOT_FOUND',",
		"  requireStack: [ '/tmp/x/index.js' ]",
		"}",
		"",
		"Node.js v20.11.1",
	}
	pythonChained = []string{
		"Traceback (most recent call last):",
		`  File "/x/a.py", line 3, in <module>`,
		"    import yaml",
		"ImportError: first failure",
		"",
		"During handling of the above exception, another exception occurred:",
		"",
		"Traceback (most recent call last):",
		`  File "/x/server.py", line 1, in <module>`,
		"    from mcp.server import Server",
		"ModuleNotFoundError: No module named 'mcp'",
	}
)

func TestCauseLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"node ESM missing package", nodeESMMissing, "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod' imported from /tmp/x/dist/index.js"},
		{"node CJS missing package", nodeCJSMissing, "Error: Cannot find package 'zod'"},
		{"python chained tracebacks: the last one's end", pythonChained, "ModuleNotFoundError: No module named 'mcp'"},
		{"python traceback cut before its end", []string{"Traceback (most recent call last):", `  File "x.py", line 1`}, ""},
		{"uv", []string{"Resolved 3 packages in 10ms", "error: Failed to spawn: `mcp-server-x`", "  Caused by: No such file or directory (os error 2)"}, "error: Failed to spawn: `mcp-server-x`"},
		{"npm 404: the line with the detail, not the code", []string{
			"npm ERR! code E404",
			"npm ERR! 404 Not Found - GET https://example.invalid/@acme%2fmissing - Not found",
			"npm ERR! 404 '@acme/missing@*' is not in this registry.",
			"npm ERR! A complete log of this run can be found in: /root/.npm/_logs/x.log",
		}, "npm ERR! 404 Not Found - GET https://example.invalid/@acme%2fmissing - Not found"},
		{"npm 10 wording", []string{"npm error code E404", "npm error 404 Not Found - GET https://example.invalid/x"}, "npm error 404 Not Found - GET https://example.invalid/x"},
		{"npm with only bookkeeping lines", []string{"npm error code ENOTCACHED", "npm error A complete log of this run can be found in: /x"}, "npm error code ENOTCACHED"},
		{"bash", []string{"bash: line 1: mcp-server-x: command not found"}, "bash: line 1: mcp-server-x: command not found"},
		{"dash", []string{"sh: 1: mcp-server-x: not found"}, "sh: 1: mcp-server-x: not found"},
		{"spawn ENOENT", []string{"node:events:497", "      throw er; // Unhandled 'error' event", "Error: spawn uvx ENOENT", "    at ChildProcess._handle.onexit"}, "Error: spawn uvx ENOENT"},
		{"TypeError after a log line", []string{"Starting server...", "TypeError: Cannot read properties of undefined (reading 'x')", "    at main (/x.js:3:5)"}, "TypeError: Cannot read properties of undefined (reading 'x')"},
		{"uncaught, qualified name", []string{"Exception in thread \"main\" java.lang.IllegalStateException: no config"}, "Exception in thread \"main\" java.lang.IllegalStateException: no config"},
		{"go panic", []string{"panic: open /etc/x: permission denied", "", "goroutine 1 [running]:", "main.main()"}, "panic: open /etc/x: permission denied"},
		{"an identifier with Error inside is not a cause", []string{"registered MyErrorHandler", "listening"}, ""},
		{"nothing that names a cause", []string{"Downloading packages...", "done"}, ""},
		{"frames alone", []string{"    at f (x.js:1:1)", "    at g (x.js:2:2)"}, ""},
		{"empty", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CauseLine(tc.lines); got != tc.want {
				t.Errorf("CauseLine = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzCauseLine: any stderr (split into lines as the tail keeps them)
// gives either "" or a trimmed line that is one of the inputs, never a
// panic.
func FuzzCauseLine(f *testing.F) {
	for _, seed := range [][]string{nodeESMMissing, nodeCJSMissing, pythonChained, {"npm ERR! code E404", "npm ERR! 404"}, {"x Error [ :", "Error ["}} {
		f.Add(strings.Join(seed, "\n"))
	}
	f.Fuzz(func(t *testing.T, text string) {
		lines := strings.Split(text, "\n")
		got := CauseLine(lines)
		if got == "" {
			return
		}
		if got != strings.TrimSpace(got) {
			t.Fatalf("not trimmed: %q", got)
		}
		found := false
		for _, l := range lines {
			if strings.TrimSpace(l) == got {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("%q is none of the lines", got)
		}
		if utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 out of valid input: %q", got)
		}
	})
}

// A process that dies of a Node stack trace exits with an error naming the
// line that says why, not the last lines of the trace.
func TestExitErrorNamesCause(t *testing.T) {
	cfg := fakeConfig(t, testkit.FakeOptions{Stderr: strings.Join(nodeESMMissing, "\n"), ExitAtStart: 1})
	_, r := start(t, cfg)
	ex := r.waitEvent("exited", 1)
	var ee *ExitError
	if !errors.As(ex.err, &ee) {
		t.Fatalf("Exited(1, %v)", ex.err)
	}
	want := "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod' imported from /tmp/x/dist/index.js"
	if ee.Cause != want {
		t.Errorf("Cause %q, want %q", ee.Cause, want)
	}
	msg := ee.Error()
	if !strings.Contains(msg, `; stderr: "`+want+`"`) || strings.Contains(msg, "Node.js v22") {
		t.Errorf("message %q: want the cause line, not the trace's tail", msg)
	}
	if len(ee.Stderr) != stderrTailLines || ee.Stderr[len(ee.Stderr)-1] != "Node.js v22.3.0" {
		t.Errorf("Stderr tail %q", ee.Stderr)
	}
}
