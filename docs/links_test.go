package docs

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestRelativeLinksResolve: every relative link in README.md and docs/*.md
// names a file or directory of the repository, and its #anchor (on this page
// or another .md file) a heading there, so moving a section breaks a test
// rather than a reader's click.
func TestRelativeLinksResolve(t *testing.T) {
	anchors := map[string][]string{} // by path from the root, read on first use
	checked := 0
	for _, f := range docFiles(t) {
		anchors[f.path] = f.Anchors
		for _, l := range f.Links {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			checked++
			target, anchor, _ := strings.Cut(l.Target, "#")
			resolved := f.path
			if target != "" {
				resolved = path.Join(path.Dir(f.path), target)
				if resolved == ".." || strings.HasPrefix(resolved, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", f.path, l.Line, l.Target)
					continue
				}
				if _, err := os.Stat(fromRoot(resolved)); err != nil {
					t.Errorf("%s:%d: link %q: %v", f.path, l.Line, l.Target, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(resolved, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", f.path, l.Line, l.Target)
				continue
			}
			as, ok := anchors[resolved]
			if !ok {
				as = readDoc(t, resolved).Anchors
				anchors[resolved] = as
			}
			if !slices.Contains(as, anchor) {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", f.path, l.Line, l.Target, resolved, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the scanner is broken")
	}
}

// repoPathRE matches a code span that names a path in the repository.
var repoPathRE = regexp.MustCompile(`^(?:\.ci|cmd|deploy|docs|e2e|examples|internal|scripts)/[A-Za-z0-9_./-]*$`)

// TestCodePathsExist: a repository path shown as code (`examples/full.json`,
// `deploy/systemd/mcpgate.service`) exists.
func TestCodePathsExist(t *testing.T) {
	checked := 0
	for _, f := range docFiles(t) {
		for _, s := range f.Spans {
			if !repoPathRE.MatchString(s.Text) {
				continue
			}
			checked++
			if _, err := os.Stat(fromRoot(s.Text)); err != nil {
				t.Errorf("%s:%d: `%s`: %v", f.path, s.Line, s.Text, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no repository path found in code: the scanner is broken")
	}
}

// TestAnchorsOfMovedSections pins the anchors other files and tests name
// (the connector recipe is cited by e2e/connector_test.go), so renaming a
// heading is a decision rather than an accident.
func TestAnchorsOfMovedSections(t *testing.T) {
	for _, want := range []struct{ path, anchor string }{
		{"docs/auth.md", "example-claude-connectors-behind-keycloak"},
		{"docs/eras.md", "what-real-clients-send"},
		{"docs/observability.md", "logs"},
		// Named by the Helm chart's refusals and README.md.
		{"docs/deployment.md", "running-more-than-one-replica"},
	} {
		if as := readDoc(t, want.path).Anchors; !slices.Contains(as, want.anchor) {
			t.Errorf("%s has no #%s: %q", want.path, want.anchor, as)
		}
	}
}
