package gateway

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestImportsPointOneWay keeps the package layout of docs/architecture.md:
// each internal package may import only the internal packages listed here,
// and the multiplexer never touches HTTP.
func TestImportsPointOneWay(t *testing.T) {
	const mod = "github.com/mcpgate/mcpgate/"
	allowed := map[string][]string{
		"internal/protocol":        {},
		"internal/jsonrpc":         {"internal/protocol"},
		"internal/sse":             {},
		"internal/config":          {"internal/seal", "internal/protocol"},
		"internal/session":         {"internal/conn"},
		"internal/seal":            {},
		"internal/auth":            {},
		"internal/metrics":         {"internal/protocol"},
		"internal/logfile":         {},
		"internal/upstream":        {},
		"internal/buffers":         {},
		"internal/upstream/stdio":  {"internal/buffers", "internal/jsonrpc", "internal/upstream"},
		"internal/conn":            {"internal/auth", "internal/jsonrpc"},
		"internal/mux":             {"internal/buffers", "internal/conn", "internal/eras", "internal/jsonrpc", "internal/upstream", "internal/protocol"},
		"internal/eras":            {"internal/conn", "internal/jsonrpc", "internal/protocol", "internal/seal"},
		"internal/limits":          {"internal/conn", "internal/jsonrpc", "internal/session", "internal/protocol"},
		"internal/cluster":         {"internal/jsonrpc", "internal/limits", "internal/session"},
		"internal/audit":           {"internal/auth", "internal/conn", "internal/jsonrpc", "internal/limits", "internal/protocol"},
		"internal/admission":       {"internal/audit", "internal/auth", "internal/conn", "internal/jsonrpc", "internal/limits", "internal/session", "internal/protocol"},
		"internal/front":           {"internal/admission", "internal/buffers", "internal/audit", "internal/auth", "internal/conn", "internal/eras", "internal/jsonrpc", "internal/limits", "internal/mux", "internal/seal", "internal/session", "internal/sse", "internal/protocol"},
		"internal/servers":         {"internal/config", "internal/conn", "internal/eras", "internal/jsonrpc", "internal/mux", "internal/upstream/stdio", "internal/upstream/remote", "internal/protocol"},
		"internal/aggregate":       {"internal/auth", "internal/conn", "internal/jsonrpc", "internal/mux", "internal/protocol"},
		"internal/policy":          {"internal/auth", "internal/config"},
		"internal/tracing":         {},
		"internal/admin":           {"internal/auth"},
		"internal/authserver":      {"internal/config", "internal/seal"},
		"internal/gateway":         {"internal/admin", "internal/aggregate", "internal/authserver", "internal/audit", "internal/auth", "internal/cluster", "internal/config", "internal/conn", "internal/front", "internal/limits", "internal/logfile", "internal/metrics", "internal/policy", "internal/seal", "internal/servers", "internal/tracing"},
		"cmd/mcpgate":              {"internal/authserver", "internal/config", "internal/gateway", "internal/loadgen", "internal/memlimit", "internal/procstat", "internal/bridge", "internal/upstream/remote", "internal/protocol"},
		"internal/upstream/remote": {"internal/jsonrpc", "internal/eras", "internal/sse", "internal/upstream", "internal/protocol"},
		"internal/bridge":          {"internal/jsonrpc", "internal/eras", "internal/upstream/remote", "internal/protocol"},
		"internal/echoserver":      {"internal/jsonrpc", "internal/sse"},
		"internal/loadgen":         {"internal/jsonrpc", "internal/sse"},
		"internal/procstat":        {},
		"internal/memlimit":        {},
		"cmd/mcpecho":              {"internal/echoserver"},
	}
	forbiddenStd := map[string][]string{
		"internal/mux":     {"net/http"},
		"internal/jsonrpc": {"net/http", "os/exec"},
		// contracts only: the kinds of upstream live in its subpackages
		"internal/upstream": {"net/http", "os/exec"},
		"internal/limits":   {"net/http"},
		// Redis only: what replicas reach of each other goes through the front
		"internal/cluster": {"net/http"},
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		ok, known := allowed[pkg]
		for _, imp := range fields[1:] {
			for _, bad := range forbiddenStd[pkg] {
				if imp == bad {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
			dep, internal := strings.CutPrefix(imp, mod)
			if !internal || !strings.HasPrefix(pkg, "internal/") && !strings.HasPrefix(pkg, "cmd/") {
				continue
			}
			if !known {
				if strings.HasPrefix(pkg, "internal/testkit") || dep == "internal/testkit" {
					continue
				}
				t.Errorf("package %s is not in the layout: add it to this test and docs/architecture.md", pkg)
				break
			}
			found := false
			for _, a := range ok {
				found = found || a == dep
			}
			if !found {
				t.Errorf("%s imports %s, against the layout", pkg, dep)
			}
		}
	}
}

// TestArchitectureDocShowsImports keeps the import table of
// docs/architecture.md ("### Imports") true to the code: every package
// (but the test-only internal/faults) has a row, and each row names
// exactly the internal packages it imports.
func TestArchitectureDocShowsImports(t *testing.T) {
	const mod = "github.com/mcpgate/mcpgate/"
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n### Imports\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "### Imports" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	documented := map[string]string{}
	row := regexp.MustCompile("^\\| `([a-z/]+)` \\| (.*) \\|$")
	for line := range strings.SplitSeq(section, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			deps := strings.ReplaceAll(m[2], "`", "")
			if deps == "none" {
				deps = ""
			}
			documented[m[1]] = deps
		}
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], mod), "internal/")
		if !strings.HasPrefix(fields[0], mod+"internal/") && !strings.HasPrefix(fields[0], mod+"cmd/") || pkg == "faults" {
			continue
		}
		var deps []string
		for _, imp := range fields[1:] {
			if dep, ok := strings.CutPrefix(imp, mod); ok {
				deps = append(deps, strings.TrimPrefix(dep, "internal/"))
			}
		}
		slices.Sort(deps)
		want, ok := documented[pkg]
		if !ok {
			t.Errorf("docs/architecture.md: no import row for %s (it imports %s)", pkg, strings.Join(deps, ", "))
			continue
		}
		seen++
		if got := strings.Join(deps, ", "); got != want {
			t.Errorf("docs/architecture.md: %s imports %q, the doc says %q", pkg, got, want)
		}
	}
	if seen != len(documented) {
		t.Errorf("docs/architecture.md has %d import rows, %d of them for packages that exist", len(documented), seen)
	}
}
