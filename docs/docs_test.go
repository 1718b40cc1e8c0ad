package docs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit/markdown"
)

// file is one documentation file, read and split.
type file struct {
	path string // relative to the repository root: "README.md", "docs/config.md"
	markdown.Doc
}

// docFiles returns README.md and every docs/*.md, the files the tests check.
func docFiles(t *testing.T) []file {
	t.Helper()
	paths, err := filepath.Glob("*.md")
	if err != nil || len(paths) == 0 {
		t.Fatalf("docs/*.md: %q, %v", paths, err)
	}
	files := []file{readDoc(t, "README.md")}
	for _, p := range paths {
		files = append(files, readDoc(t, "docs/"+p))
	}
	return files
}

// readDoc reads a Markdown file named relative to the repository root.
func readDoc(t *testing.T, path string) file {
	t.Helper()
	data, err := os.ReadFile(fromRoot(path))
	if err != nil {
		t.Fatal(err)
	}
	return file{path: path, Doc: markdown.Parse(string(data))}
}

// fromRoot turns a path relative to the repository root into one relative
// to this package's directory, where tests run.
func fromRoot(path string) string {
	return filepath.Join("..", filepath.FromSlash(path))
}
