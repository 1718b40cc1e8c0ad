package config

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one error in a config, with the key path it is about.
//
// Path is dotted, with array indexes in brackets: "gateway.drainTimeout",
// "mcpServers.memory.args[2]", "mcpServers.fs.roots[0].uri". It is empty
// for problems about the document as a whole (malformed JSON).
type Problem struct {
	Path string
	Msg  string
}

// Error returns "path: msg", or just msg when the path is empty.
func (p Problem) Error() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Problems is returned when a config has errors; Error() joins them one per
// line, sorted by path.
type Problems []Problem

// Error returns every problem, one per line, sorted by path.
func (ps Problems) Error() string {
	sorted := append(Problems(nil), ps...)
	sorted.sort()
	lines := make([]string, len(sorted))
	for i, p := range sorted {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns each problem as an error, so that errors.As can find a
// single Problem.
func (ps Problems) Unwrap() []error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errs
}

// sort orders problems by path, keeping the order in which problems about
// the same path were found.
func (ps Problems) sort() {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Path < ps[j].Path })
}

// add appends a problem about path.
func (ps *Problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// join returns the path of key inside the object at path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// index returns the path of element i of the array at path.
func index(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}
